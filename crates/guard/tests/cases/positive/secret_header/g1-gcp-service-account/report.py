import csv
from google.cloud import bigquery
from google.oauth2 import service_account

creds = service_account.Credentials.from_service_account_file("sa.json")
client = bigquery.Client(credentials=creds, project=creds.project_id)
rows = client.query(
    "SELECT service.description AS service, SUM(cost) AS cost "
    "FROM `billing.gcp_billing_export_v1` WHERE usage_start_time > TIMESTAMP_SUB(CURRENT_TIMESTAMP(), INTERVAL 7 DAY) "
    "GROUP BY service ORDER BY cost DESC"
).result()
with open("costs.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["service", "cost"])
    for r in rows:
        w.writerow([r.service, round(r.cost, 2)])
