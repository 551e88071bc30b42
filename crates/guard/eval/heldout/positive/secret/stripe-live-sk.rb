Stripe.api_key = 'sk_live_{{rand:alnum:48}}'
