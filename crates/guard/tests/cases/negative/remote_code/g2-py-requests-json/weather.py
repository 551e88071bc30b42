import sys
import requests

API = "https://api.open-meteo.com/v1/forecast"
CITIES = {"berlin": (52.52, 13.41), "paris": (48.85, 2.35)}

def forecast(city):
    lat, lon = CITIES[city.lower()]
    r = requests.get(API, params={"latitude": lat, "longitude": lon, "hourly": "temperature_2m"}, timeout=10)
    r.raise_for_status()
    data = r.json()
    temps = data["hourly"]["temperature_2m"][:24]
    return min(temps), max(temps)

if __name__ == "__main__":
    lo, hi = forecast(sys.argv[1])
    print(f"{sys.argv[1]}: {lo}..{hi} C today")
