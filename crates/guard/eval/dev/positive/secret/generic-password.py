DB_HOST = 'db.internal'
DB_PASSWORD = 'x9Fq!2kLm#8RtVw'
