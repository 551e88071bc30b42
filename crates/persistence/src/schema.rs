//! The diesel schema, one for both backends: TEXT ids, BIGINT unix-millisecond timestamps,
//! JSON as TEXT, Bool. Kept by hand in step with `migrations/{sqlite,postgres}`.

diesel::table! {
    tenants (id) {
        id -> Text,
        name -> Text,
        status -> Text,
        region -> Text,
        ai_enabled -> Bool,
        created_at -> BigInt,
        requests_per_minute -> Nullable<BigInt>,
        tokens_per_minute -> Nullable<BigInt>,
        monthly_tokens -> Nullable<BigInt>,
        ai_keys_version -> BigInt,
        allowed_models -> Nullable<Text>,
        monthly_spend -> Nullable<BigInt>,
    }
}

diesel::table! {
    users (id) {
        id -> Text,
        email -> Text,
        name -> Text,
        role -> Text,
        status -> Text,
        tenant_id -> Nullable<Text>,
        password_hash -> Text,
        created_at -> BigInt,
    }
}

diesel::table! {
    sessions (id) {
        id -> Text,
        user_id -> Text,
        token_hash -> Text,
        created_at -> BigInt,
        last_seen_at -> BigInt,
        expires_at -> BigInt,
        user_agent -> Text,
        ip -> Text,
        shadow_tenant_id -> Nullable<Text>,
        shadow_since -> Nullable<BigInt>,
    }
}

diesel::table! {
    signin_failures (id) {
        id -> Text,
        email -> Text,
        at -> BigInt,
    }
}

diesel::table! {
    records (id) {
        id -> Text,
        tenant_id -> Text,
        kind -> Text,
        parent_id -> Nullable<Text>,
        version -> BigInt,
        fields -> Text,
        created_at -> BigInt,
        updated_at -> BigInt,
        created_by -> Text,
        guard -> Nullable<Text>,
        guard_rules_version -> Nullable<Text>,
    }
}

diesel::table! {
    record_versions (tenant_id) {
        tenant_id -> Text,
        version -> BigInt,
    }
}

diesel::table! {
    settings (tenant_id) {
        tenant_id -> Text,
        fields -> Text,
        version -> BigInt,
        updated_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    activity (id) {
        id -> Text,
        tenant_id -> Text,
        at -> BigInt,
        actor_kind -> Text,
        actor_id -> Text,
        actor_label -> Text,
        action -> Text,
        target_kind -> Nullable<Text>,
        target_id -> Nullable<Text>,
        detail -> Text,
    }
}

diesel::table! {
    api_keys (id) {
        id -> Text,
        tenant_id -> Text,
        user_id -> Text,
        name -> Text,
        scopes -> Text,
        hint -> Text,
        key_hash -> Text,
        created_at -> BigInt,
        last_used_at -> Nullable<BigInt>,
        expires_at -> Nullable<BigInt>,
        revoked_at -> Nullable<BigInt>,
        requests_per_minute -> Nullable<BigInt>,
        tokens_per_minute -> Nullable<BigInt>,
        monthly_spend -> Nullable<BigInt>,
    }
}

diesel::table! {
    tenant_ai_keys (id) {
        id -> Text,
        tenant_id -> Text,
        region -> Text,
        label -> Text,
        hint -> Text,
        sealed_secret -> Text,
        chat_enabled -> Bool,
        status -> Text,
        status_reason -> Nullable<Text>,
        checked_at -> Nullable<BigInt>,
        created_at -> BigInt,
    }
}

diesel::table! {
    quota_windows (subject, window_start) {
        subject -> Text,
        window_start -> BigInt,
        requests -> BigInt,
        tokens -> BigInt,
    }
}

diesel::table! {
    run_usage (id) {
        id -> Text,
        tenant_id -> Text,
        key_id -> Text,
        at -> BigInt,
        day -> Text,
        model -> Text,
        failed -> Bool,
        prompt_tokens -> BigInt,
        completion_tokens -> BigInt,
        total_tokens -> BigInt,
        cost -> BigInt,
    }
}

diesel::table! {
    admin_tokens (id) {
        id -> Text,
        user_id -> Text,
        name -> Text,
        scope -> Text,
        token_hash -> Text,
        created_at -> BigInt,
        expires_at -> Nullable<BigInt>,
        last_used_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    admin_token_uses (id) {
        id -> Text,
        at -> BigInt,
        admin_id -> Text,
        token_id -> Text,
        token_name -> Text,
        route -> Text,
    }
}

diesel::table! {
    gateway_urls (region) {
        region -> Text,
        fingerprint -> Text,
        changed_at -> BigInt,
    }
}

diesel::joinable!(sessions -> users (user_id));
diesel::joinable!(api_keys -> users (user_id));
diesel::joinable!(admin_tokens -> users (user_id));
diesel::joinable!(users -> tenants (tenant_id));

diesel::allow_tables_to_appear_in_same_query!(
    tenants,
    users,
    sessions,
    signin_failures,
    records,
    record_versions,
    settings,
    activity,
    api_keys,
    admin_tokens,
    admin_token_uses,
    tenant_ai_keys,
    gateway_urls,
    quota_windows,
    run_usage,
);
