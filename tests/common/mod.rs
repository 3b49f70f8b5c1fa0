//! Helpers shared by the integration tests.

// Each test binary includes all of this and uses only its part.
#![allow(dead_code)]

pub mod netns;

use serde_json::Value;

/// Panics, with the validator's account, unless `v` matches schema/collbench-info.schema.json.
pub fn validate_info_against_schema(v: &Value) {
    let schema: Value =
        serde_json::from_str(include_str!("../../schema/collbench-info.schema.json")).expect("schema parses");
    let mut compiler = boon::Compiler::new();
    let mut schemas = boon::Schemas::new();
    compiler.add_resource("urn:collbench-info", schema).unwrap();
    let idx = compiler.compile("urn:collbench-info", &mut schemas).unwrap();
    if let Err(e) = schemas.validate(v, idx) {
        panic!("info JSON does not match its schema: {e:#}\n{v:#}");
    }
}

/// Panics, with the validator's account, unless `v` matches schema/collbench-results.schema.json.
pub fn validate_against_schema(v: &Value) {
    let schema: Value =
        serde_json::from_str(include_str!("../../schema/collbench-results.schema.json")).expect("schema parses");
    let mut compiler = boon::Compiler::new();
    let mut schemas = boon::Schemas::new();
    compiler.add_resource("urn:collbench-results", schema).unwrap();
    let idx = compiler.compile("urn:collbench-results", &mut schemas).unwrap();
    if let Err(e) = schemas.validate(v, idx) {
        panic!("JSON output does not match the schema: {e:#}");
    }
}
