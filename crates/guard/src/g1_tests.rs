//! Issue 29 (helper G1): secrets the Guard used to miss, instructions to the model that are not
//! in English, not in the body or encoded, and honest wording that used to be flagged. Token
//! shapes are generated at test time so that no real-looking secret is committed.

use super::{random, scanner, ALNUM};
use crate::{Scanner, Severity};

const HEX: &str = "0123456789abcdef";
const LOWNUM: &str = "abcdefghijklmnopqrstuvwxyz0123456789";

fn worst(s: &Scanner, path: Option<&str>, text: &str, rule: &str) -> Option<Severity> {
    s.scan_text(path, text)
        .into_iter()
        .filter(|f| f.rule_id == rule)
        .map(|f| f.severity)
        .max()
}

fn flagged(s: &Scanner, path: Option<&str>, text: &str) -> Vec<String> {
    s.scan_text(path, text)
        .into_iter()
        .filter(|f| f.severity >= Severity::Medium)
        .map(|f| format!("{} [{}] {}", f.rule_id, f.severity, f.excerpt))
        .collect()
}

#[test]
fn provider_token_shapes_added_for_issue_29_are_caught_and_redacted() {
    let s = scanner();
    let cases = [
        format!("MAILGUN_API_KEY=key-{}", random(32, HEX, 101)),
        format!(
            "BREVO_KEY=xkeysib-{}-{}",
            random(64, HEX, 102),
            random(16, ALNUM, 103)
        ),
        format!("NEW_RELIC_BROWSER=NRJS-{}", random(19, HEX, 104)),
        format!("JFROG_API_KEY=AKCp{}", random(69, ALNUM, 105)),
        format!("TYPEFORM=tfp_{}", random(59, ALNUM, 106)),
        format!("DOPPLER_TOKEN=dp.st.prd.{}", random(40, ALNUM, 107)),
        format!("CLOJARS_{}", random(60, LOWNUM, 108)),
        format!("ak = \"LTAI{}\"", random(20, ALNUM, 109)),
        format!(
            "pc = Pinecone(key=\"pcsk_{}_{}\")",
            random(5, ALNUM, 110),
            random(60, ALNUM, 111)
        ),
        format!("STRIPE_WH=whsec_{}", random(32, ALNUM, 112)),
        format!("TAVILY=tvly-{}", random(32, ALNUM, 113)),
        format!("FIRECRAWL=fc-{}", random(32, HEX, 114)),
        format!("RUNNER=glcbt-{}", random(24, ALNUM, 115)),
    ];
    for c in &cases {
        let found = s.scan_text(Some("config.env"), c);
        let hit = found
            .iter()
            .find(|f| f.rule_id == "secret.service-token" && f.severity == Severity::High);
        assert!(hit.is_some(), "{c}: {found:?}");
        // The token never appears in the excerpt.
        let tail: String = c.chars().rev().take(12).collect();
        let tail: String = tail.chars().rev().collect();
        assert!(found.iter().all(|f| !f.excerpt.contains(&tail)), "{c}");
    }
    for honest in [
        "MAILGUN_API_KEY=key-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "TAVILY=tvly-YOUR_API_KEY_HERE_0000000000000",
        "Set `FIRECRAWL_API_KEY` to your fc- key from the dashboard.",
        "the primary-key-0123456789abcdef0123456789abcdef column",
    ] {
        assert_eq!(
            worst(&s, Some("config.env"), honest, "secret.service-token"),
            None,
            "{honest}"
        );
    }
}

#[test]
fn slack_workflow_and_trigger_webhooks_are_secrets() {
    let s = scanner();
    let wf = format!(
        "curl -X POST https://hooks.slack.com/workflows/T{}/A{}/{}/{} -d @msg.json",
        random(9, "ABCDEFGHJKLMNPQRSTUVWXYZ0123456789", 120),
        random(9, "ABCDEFGHJKLMNPQRSTUVWXYZ0123456789", 121),
        random(18, "0123456789", 122),
        random(24, ALNUM, 123)
    );
    let trig = format!(
        "WEBHOOK=https://hooks.slack.com/triggers/T{}/{}/{}",
        random(9, "ABCDEFGHJKLMNPQRSTUVWXYZ0123456789", 124),
        random(13, "0123456789", 125),
        random(32, HEX, 126)
    );
    for t in [&wf, &trig] {
        assert_eq!(
            worst(&s, Some("notify.sh"), t, "secret.slack-webhook"),
            Some(Severity::High),
            "{t}"
        );
        let f = s.scan_text(Some("notify.sh"), t);
        assert!(f.iter().all(|f| !f.excerpt.contains(&t[t.len() - 10..])));
    }
    let placeholder =
        "WEBHOOK=https://hooks.slack.com/triggers/T00000000/0000000000000/XXXXXXXXXXXXXXXXXXXXXXXX";
    assert_eq!(
        worst(&s, Some("notify.sh"), placeholder, "secret.slack-webhook"),
        None
    );
}

#[test]
fn a_service_account_key_file_with_escaped_line_ends_is_a_private_key() {
    let s = scanner();
    let body = random(64, ALNUM, 130) + "\\n" + &random(64, ALNUM, 131);
    let json = format!(
        "{{\n  \"type\": \"service_account\",\n  \"project_id\": \"acme-prod\",\n  \"private_key\": \"-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC{body}\\n-----END PRIVATE KEY-----\\n\",\n  \"client_email\": \"bot@acme-prod.iam.gserviceaccount.com\"\n}}\n"
    );
    assert_eq!(
        worst(&s, Some("sa.json"), &json, "secret.private-key"),
        Some(Severity::Critical)
    );
    let doc = "  \"private_key\": \"-----BEGIN PRIVATE KEY-----\\n<your key here>\\n-----END PRIVATE KEY-----\\n\",";
    assert_eq!(worst(&s, Some("sa.json"), doc, "secret.private-key"), None);
}

#[test]
fn literal_credentials_in_headers_are_secrets_and_references_are_not() {
    let s = scanner();
    let yaml = format!(
        "steps:\n  - run: |\n      curl -fsS -X POST \\\n        -H \"Authorization: Bearer {}\" \\\n        https://deploy.acme-corp.net/hooks/release\n",
        random(48, ALNUM, 140)
    );
    assert_eq!(
        worst(&s, Some("scripts/release.sh"), &yaml, "secret.auth-header"),
        Some(Severity::High)
    );
    let found = s.scan_text(Some("scripts/release.sh"), &yaml);
    let token_tail = &random(48, ALNUM, 140)[30..];
    assert!(found.iter().all(|f| !f.excerpt.contains(token_tail)));
    // A secret is not weighed down in a carried file: it is real wherever it sits.
    assert_eq!(
        worst(
            &s,
            Some("tests/test_release.sh"),
            &yaml,
            "secret.auth-header"
        ),
        Some(Severity::High)
    );
    for honest in [
        "curl -H \"Authorization: token ${GH_TOKEN}\" https://api.github.com",
        "-H \"Authorization: Bearer ${{ secrets.DEPLOY_TOKEN }}\"",
        "req.headers['Authorization'] = 'Bearer ' + token",
        "Authorization: Bearer <token>",
        "X-API-Key: your-api-key-here-please",
        "curl -H \"Authorization: Basic $(echo -n \"$U:$P\" | base64)\" https://x.invalid",
    ] {
        assert_eq!(
            worst(&s, Some("x.sh"), honest, "secret.auth-header"),
            None,
            "{honest}"
        );
    }
    let _ = flagged;
}
