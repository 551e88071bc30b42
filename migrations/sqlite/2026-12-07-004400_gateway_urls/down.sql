DROP INDEX admin_token_uses_at;
DROP TABLE gateway_urls;
