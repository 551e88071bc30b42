//! SARIF 2.1.0 output.

use crate::model::{ScanReport, Severity, TargetInfo};
use crate::rules::RULES;
use serde_json::{json, Value};

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Critical | Severity::High => "error",
        Severity::Medium => "warning",
        Severity::Low | Severity::Info => "note",
    }
}

fn security_severity(s: Severity) -> &'static str {
    match s {
        Severity::Critical => "9.5",
        Severity::High => "8.0",
        Severity::Medium => "5.5",
        Severity::Low => "3.0",
        Severity::Info => "1.0",
    }
}

/// Renders a report as a SARIF 2.1.0 log with one run. Every rule of the catalog is listed in
/// `tool.driver.rules`; results refer to them by id and index. Findings without a path (pasted
/// content) are located in the artifact `content`. A `scan.incomplete` finding is a result and
/// also a warning notification of the invocation; `properties.complete` says whether every
/// file was read whole.
pub fn to_sarif(report: &ScanReport, target: &TargetInfo) -> Value {
    let rules: Vec<Value> = RULES
        .iter()
        .map(|r| {
            json!({
                "id": r.id,
                "name": r.title,
                "shortDescription": { "text": r.title },
                "fullDescription": { "text": r.description },
                "help": { "text": r.remediation },
                "defaultConfiguration": { "level": level(r.severity) },
                "properties": {
                    "tags": ["security", r.category.as_str()],
                    "severity": r.severity.as_str(),
                    "security-severity": security_severity(r.severity),
                },
            })
        })
        .collect();
    let results: Vec<Value> = report
        .findings
        .iter()
        .map(|f| {
            let index = RULES.iter().position(|r| r.id == f.rule_id);
            let uri = f.path.clone().unwrap_or_else(|| "content".to_string());
            let mut result = json!({
                "ruleId": f.rule_id,
                "level": level(f.severity),
                "message": { "text": format!("{}: {}", f.title, f.message) },
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": { "uri": uri },
                        "region": {
                            "startLine": f.line.max(1),
                            "startColumn": f.column.max(1),
                            "snippet": { "text": f.excerpt },
                        },
                    },
                }],
                "properties": {
                    "severity": f.severity.as_str(),
                    "security-severity": security_severity(f.severity),
                },
            });
            if let (Some(i), Some(obj)) = (index, result.as_object_mut()) {
                obj.insert("ruleIndex".into(), json!(i));
            }
            result
        })
        .collect();
    // What the scan could not examine is also a notification of the tool's run, where SARIF
    // viewers show that an analysis was partial.
    let notifications: Vec<Value> = report
        .findings
        .iter()
        .filter(|f| f.rule_id == crate::coverage::RULE_ID)
        .map(|f| {
            let index = RULES.iter().position(|r| r.id == f.rule_id);
            json!({
                "level": "warning",
                "associatedRule": { "id": f.rule_id, "index": index },
                "message": { "text": f.message },
            })
        })
        .collect();
    let complete = notifications.is_empty();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {
                "driver": {
                    "name": "gc-guard",
                    "version": env!("CARGO_PKG_VERSION"),
                    "rules": rules,
                },
            },
            "columnKind": "unicodeCodePoints",
            "invocations": [{
                "executionSuccessful": true,
                "toolExecutionNotifications": notifications,
            }],
            "results": results,
            "properties": {
                "verdict": report.verdict(),
                "complete": complete,
                "mode": crate::MODE_SKILL,
                "target": target,
                "stats": report.stats,
                "inventory": report.stats.inventory,
            },
        }],
    })
}
