TWILIO_API_KEY = 'SK{{rand:hex:32}}'
TWILIO_API_SECRET = '{{rand:alnum:32}}'
