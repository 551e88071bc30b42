//! Field rules of stored workspace records and settings.
//!
//! Records are stored and returned, never executed, indexed or fetched: a skill's content is
//! text, a source of kind `url` is a string. Validation checks shape and size only.

use serde_json::{json, Map, Value};

use crate::error::{DomainError, DomainResult};
use crate::model::workspace::RecordKind;
use crate::values::{text, Timezone};

/// 256 KiB: the size limit of skill content, source content and draft definitions.
pub const MAX_CONTENT_BYTES: usize = 256 * 1024;
const MAX_TAGS: usize = 32;

#[derive(Debug, Clone, Copy)]
enum FieldType {
    /// A single-line name: trimmed, bounded in characters.
    Name {
        min: usize,
        max: usize,
    },
    /// Free text, bounded in characters.
    Text {
        max: usize,
    },
    /// Verbatim content, bounded in bytes (not trimmed: whitespace matters in SKILL.md).
    Content {
        min: usize,
    },
    Tags,
    OneOf(&'static [&'static str]),
    Object,
    Timezone,
}

#[derive(Debug, Clone, Copy)]
struct FieldSpec {
    name: &'static str,
    ty: FieldType,
    required: bool,
}

const fn field(name: &'static str, ty: FieldType, required: bool) -> FieldSpec {
    FieldSpec { name, ty, required }
}

const NAME: FieldType = FieldType::Name { min: 1, max: 100 };
const DESCRIPTION: FieldType = FieldType::Text { max: 1000 };

const SKILL: &[FieldSpec] = &[
    field("name", NAME, true),
    field("description", DESCRIPTION, false),
    field("content", FieldType::Content { min: 1 }, true),
    field("tags", FieldType::Tags, false),
];
const COLLECTION: &[FieldSpec] = &[
    field("name", NAME, true),
    field("description", DESCRIPTION, false),
];
const SOURCE: &[FieldSpec] = &[
    field("title", FieldType::Name { min: 1, max: 200 }, true),
    field("kind", FieldType::OneOf(&["text", "url", "note"]), true),
    field("content", FieldType::Content { min: 0 }, true),
];
const DRAFT: &[FieldSpec] = &[
    field("name", NAME, true),
    field("description", DESCRIPTION, false),
    field("definition", FieldType::Object, false),
];
const SETTINGS: &[FieldSpec] = &[
    field("display_name", FieldType::Name { min: 0, max: 100 }, false),
    field("description", DESCRIPTION, false),
    field("default_model", FieldType::Name { min: 0, max: 100 }, false),
    field("timezone", FieldType::Timezone, false),
];

fn specs(kind: RecordKind) -> &'static [FieldSpec] {
    match kind {
        RecordKind::Skill => SKILL,
        RecordKind::MemoryCollection => COLLECTION,
        RecordKind::MemorySource => SOURCE,
        RecordKind::AgentDraft | RecordKind::WorkflowDraft | RecordKind::AppDraft => DRAFT,
    }
}

fn default_of(ty: FieldType) -> Value {
    match ty {
        FieldType::Tags => Value::Array(Vec::new()),
        FieldType::Object => Value::Object(Map::new()),
        FieldType::Timezone => Value::String("UTC".into()),
        _ => Value::String(String::new()),
    }
}

fn expect_str<'a>(name: &str, value: &'a Value) -> DomainResult<&'a str> {
    value
        .as_str()
        .ok_or_else(|| DomainError::invalid(name, "must be a string"))
}

fn check(spec: &FieldSpec, value: &Value) -> DomainResult<Value> {
    let name = spec.name;
    Ok(match spec.ty {
        FieldType::Name { min, max } => {
            Value::String(text(name, expect_str(name, value)?, min, max)?)
        }
        FieldType::Text { max } => {
            let s = expect_str(name, value)?;
            if s.chars().count() > max {
                return Err(DomainError::invalid(
                    name,
                    format!("must be at most {max} characters long"),
                ));
            }
            Value::String(s.to_owned())
        }
        FieldType::Content { min } => {
            let s = expect_str(name, value)?;
            if s.len() > MAX_CONTENT_BYTES {
                return Err(DomainError::invalid(name, "must be at most 256 KiB"));
            }
            if s.trim().len() < min {
                return Err(DomainError::invalid(name, "must not be empty"));
            }
            Value::String(s.to_owned())
        }
        FieldType::Tags => {
            let items = value
                .as_array()
                .ok_or_else(|| DomainError::invalid(name, "must be an array of strings"))?;
            if items.len() > MAX_TAGS {
                return Err(DomainError::invalid(
                    name,
                    format!("must have at most {MAX_TAGS} tags"),
                ));
            }
            let mut tags = Vec::with_capacity(items.len());
            for item in items {
                let tag = text(name, expect_str(name, item)?, 1, 50)?;
                if !tags.contains(&Value::String(tag.clone())) {
                    tags.push(Value::String(tag));
                }
            }
            Value::Array(tags)
        }
        FieldType::OneOf(allowed) => {
            let s = expect_str(name, value)?;
            if !allowed.contains(&s) {
                return Err(DomainError::invalid(
                    name,
                    format!("must be one of {}", allowed.join(", ")),
                ));
            }
            Value::String(s.to_owned())
        }
        FieldType::Object => {
            if !value.is_object() {
                return Err(DomainError::invalid(name, "must be a JSON object"));
            }
            if value.to_string().len() > MAX_CONTENT_BYTES {
                return Err(DomainError::invalid(
                    name,
                    "must be at most 256 KiB as JSON",
                ));
            }
            value.clone()
        }
        FieldType::Timezone => Value::String(
            Timezone::parse(name, expect_str(name, value)?)?
                .as_str()
                .to_owned(),
        ),
    })
}

fn validate(
    specs: &[FieldSpec],
    input: &Map<String, Value>,
    base: Option<&Map<String, Value>>,
) -> DomainResult<Map<String, Value>> {
    if let Some(unknown) = input
        .keys()
        .find(|k| !specs.iter().any(|s| s.name == k.as_str()))
    {
        return Err(DomainError::UnknownField(unknown.clone()));
    }
    let mut out = Map::new();
    for spec in specs {
        let value = match (input.get(spec.name), base.and_then(|b| b.get(spec.name))) {
            (Some(Value::Null), _) if spec.required => {
                return Err(DomainError::invalid(spec.name, "must not be null"));
            }
            (Some(Value::Null), _) => default_of(spec.ty),
            (Some(v), _) => check(spec, v)?,
            (None, Some(old)) => old.clone(),
            (None, None) if spec.required && base.is_none() => {
                return Err(DomainError::invalid(spec.name, "is required"));
            }
            (None, None) => default_of(spec.ty),
        };
        out.insert(spec.name.to_owned(), value);
    }
    Ok(out)
}

/// Characters [`text`] refuses: control characters other than tab, line feed and carriage
/// return (Rust's `char::is_control`), as a regular-expression class body.
const CONTROL_CLASS: &str = r"\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F";

/// The JSON Schema of a string [`text`] accepts with `min ∈ {0, 1}` and `max` characters:
/// no refused control character and, when `min` is 1, at least one character that is not
/// white space (the value is trimmed before it is counted).
pub fn text_schema(min: usize, max: usize) -> Value {
    let pattern = if min > 0 {
        format!("^[^{CONTROL_CLASS}]*[^\\s{CONTROL_CLASS}][^{CONTROL_CLASS}]*$")
    } else {
        format!("^[^{CONTROL_CLASS}]*$")
    };
    json!({"type": "string", "maxLength": max, "pattern": pattern})
}

fn field_schema(ty: FieldType) -> Value {
    match ty {
        FieldType::Name { min, max } => text_schema(min, max),
        FieldType::Text { max } => json!({"type": "string", "maxLength": max}),
        FieldType::Content { min } => {
            let mut s = json!({
                "type": "string",
                "maxLength": MAX_CONTENT_BYTES,
                "description": "At most 256 KiB (counted in bytes)."
            });
            if min > 0 {
                s["pattern"] = json!("\\S");
            }
            s
        }
        FieldType::Tags => json!({
            "type": "array",
            "maxItems": MAX_TAGS,
            "items": text_schema(1, 50),
            "description": "Duplicates collapse."
        }),
        FieldType::OneOf(allowed) => json!({"type": "string", "enum": allowed}),
        FieldType::Object => json!({
            "type": "object",
            "description": "Any JSON object, at most 256 KiB as JSON."
        }),
        FieldType::Timezone => json!({
            "type": "string",
            "enum": chrono_tz::TZ_VARIANTS.iter().map(|tz| tz.name()).collect::<Vec<_>>(),
            "description": "An IANA time-zone name."
        }),
    }
}

/// A schema that also accepts `null` (a `type` of `[type, "null"]`, `null` among an `enum`).
pub fn nullable(mut schema: Value) -> Value {
    if let Some(ty) = schema.get("type").and_then(Value::as_str) {
        schema["type"] = json!([ty, "null"]);
    }
    if let Some(values) = schema.get_mut("enum").and_then(Value::as_array_mut) {
        values.push(Value::Null);
    }
    schema
}

fn schema_of(specs: &[FieldSpec], create: bool) -> Value {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for spec in specs {
        // A required field never takes null; an optional one is reset to its default by it.
        let schema = if spec.required {
            field_schema(spec.ty)
        } else {
            nullable(field_schema(spec.ty))
        };
        if spec.required && create {
            required.push(spec.name);
        }
        properties.insert(spec.name.to_owned(), schema);
    }
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false
    })
}

/// The JSON Schema of a record body, generated from the same table that validates it: `create`
/// lists the required fields; a PATCH takes any subset. Unknown fields are refused.
pub fn body_schema(kind: RecordKind, create: bool) -> Value {
    schema_of(specs(kind), create)
}

/// The JSON Schema of a settings update.
pub fn settings_schema() -> Value {
    schema_of(SETTINGS, false)
}

/// Validates the body of a create: required fields present, defaults filled in.
pub fn validate_create(
    kind: RecordKind,
    input: &Map<String, Value>,
) -> DomainResult<Map<String, Value>> {
    validate(specs(kind), input, None)
}

/// Validates a partial update and merges it over the stored fields.
pub fn validate_patch(
    kind: RecordKind,
    input: &Map<String, Value>,
    stored: &Map<String, Value>,
) -> DomainResult<Map<String, Value>> {
    validate(specs(kind), input, Some(stored))
}

/// Validates a settings update and merges it over the stored settings.
pub fn validate_settings(
    input: &Map<String, Value>,
    stored: &Map<String, Value>,
) -> DomainResult<Map<String, Value>> {
    validate(SETTINGS, input, Some(stored))
}

/// The settings of a tenant that never wrote any, with every field present.
pub fn settings_with_defaults(stored: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for spec in SETTINGS {
        let value = stored
            .get(spec.name)
            .cloned()
            .unwrap_or_else(|| match spec.name {
                "default_model" => Value::String("auto".into()),
                _ => default_of(spec.ty),
            });
        out.insert(spec.name.to_owned(), value);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_field_uses_a_name_of_the_record_metadata() {
        // A record's JSON splices its fields after these members (`RecordFields::members`).
        const META: [&str; 7] = [
            "id",
            "version",
            "created_at",
            "updated_at",
            "created_by",
            "collection_id",
            // A skill's Guard verdict (`services::skill_scan`), written after the fields.
            "guard",
        ];
        for kind in RecordKind::ALL {
            for spec in specs(kind) {
                assert!(!META.contains(&spec.name), "{kind:?} has {}", spec.name);
            }
        }
    }

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn a_skill_needs_name_and_content_and_gets_defaults() {
        let ok = validate_create(
            RecordKind::Skill,
            &map(json!({"name": " Lint ", "content": "# Lint"})),
        )
        .unwrap();
        assert_eq!(ok["name"], "Lint");
        assert_eq!(ok["tags"], json!([]));
        assert_eq!(ok["description"], "");
        let err = validate_create(RecordKind::Skill, &map(json!({"name": "x"}))).unwrap_err();
        assert_eq!(err, DomainError::invalid("content", "is required"));
    }

    #[test]
    fn unknown_fields_and_wrong_types_are_refused() {
        let err = validate_create(
            RecordKind::MemoryCollection,
            &map(json!({"name": "a", "colour": 1})),
        )
        .unwrap_err();
        assert_eq!(err.code(), "unknown_field");
        let err = validate_create(RecordKind::Skill, &map(json!({"name": 3, "content": "x"})))
            .unwrap_err();
        assert!(err.to_string().starts_with("name:"));
    }

    #[test]
    fn sizes_are_enforced() {
        let big = "x".repeat(MAX_CONTENT_BYTES + 1);
        let err = validate_create(
            RecordKind::Skill,
            &map(json!({"name": "a", "content": big})),
        )
        .unwrap_err();
        assert!(err.to_string().starts_with("content:"));
        let err = validate_create(
            RecordKind::Skill,
            &map(json!({"name": "a".repeat(101), "content": "x"})),
        )
        .unwrap_err();
        assert!(err.to_string().starts_with("name:"));
        let big_def = json!({"name": "a", "definition": {"k": "x".repeat(MAX_CONTENT_BYTES)}});
        assert!(validate_create(RecordKind::AgentDraft, &map(big_def)).is_err());
    }

    #[test]
    fn sources_have_a_closed_set_of_kinds() {
        assert!(validate_create(
            RecordKind::MemorySource,
            &map(json!({"title": "t", "kind": "url", "content": "https://example.com"}))
        )
        .is_ok());
        assert!(validate_create(
            RecordKind::MemorySource,
            &map(json!({"title": "t", "kind": "pdf", "content": ""}))
        )
        .is_err());
    }

    #[test]
    fn a_patch_merges_over_stored_fields() {
        let stored = validate_create(
            RecordKind::Skill,
            &map(json!({"name": "a", "content": "x", "tags": ["t"]})),
        )
        .unwrap();
        let patched = validate_patch(
            RecordKind::Skill,
            &map(json!({"description": "d"})),
            &stored,
        )
        .unwrap();
        assert_eq!(patched["name"], "a");
        assert_eq!(patched["tags"], json!(["t"]));
        assert_eq!(patched["description"], "d");
        assert!(validate_patch(RecordKind::Skill, &map(json!({"name": null})), &stored).is_err());
    }

    #[test]
    fn settings_validate_timezones() {
        let s =
            validate_settings(&map(json!({"timezone": "Asia/Hong_Kong"})), &Map::new()).unwrap();
        assert_eq!(s["timezone"], "Asia/Hong_Kong");
        assert!(validate_settings(&map(json!({"timezone": "Nowhere/Town"})), &Map::new()).is_err());
        assert_eq!(settings_with_defaults(&Map::new())["default_model"], "auto");
    }
}
