import os
import sys
import requests

API_KEY = os.environ.get('WEATHER_API_KEY', '')

def main(city: str) -> None:
    r = requests.get('https://api.openweathermap.org/data/2.5/weather', params={'q': city, 'appid': API_KEY}, timeout=10)
    r.raise_for_status()
    print(r.json()['weather'][0]['description'])

if __name__ == '__main__':
    main(sys.argv[1])
