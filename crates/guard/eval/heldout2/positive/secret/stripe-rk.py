stripe.api_key = 'rk_live_{{rand:alnum:32}}'
