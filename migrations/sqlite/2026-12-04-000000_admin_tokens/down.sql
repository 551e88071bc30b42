DROP TABLE admin_token_uses;
DROP TABLE admin_tokens;
