const stripe = require('stripe')('sk_test_51{{rand:alnum:60}}');
