//! What readers use of a results file's `collbench.summary`: each path's line rate and cost, the paths
//! compared, and the model's predictions. Read leniently: a field of another shape reads as absent, as a
//! summary is context, not the measurement; only a prediction that is not one is named (`plot` draws them).

use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// `collbench.summary` as read. Written as the run's [`Summary`](super::Summary).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct SummaryView {
    #[serde(deserialize_with = "list_or_empty")]
    pub paths: Vec<PathView>,
    #[serde(deserialize_with = "list_or_empty")]
    pub comparison: Vec<ComparisonView>,
    /// The `collbench model` document, when the run made one.
    pub model: Option<ModelView>,
}

/// One path of `summary.paths`: its line rate and what it cost (written as [`PathCost`](super::PathCost)).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct PathView {
    #[serde(deserialize_with = "text_or_none")]
    pub path: Option<String>,
    #[serde(deserialize_with = "number_or_none")]
    pub line_rate_gbs: Option<f64>,
    /// Whether the CPUs, not the network, probably set the pace.
    #[serde(deserialize_with = "true_or_false")]
    pub cpu_limited: bool,
    #[serde(deserialize_with = "number_or_none")]
    pub host_busy_pct: Option<f64>,
    #[serde(deserialize_with = "number_or_none")]
    pub host_cpu_pct: Option<f64>,
    #[serde(deserialize_with = "text_or_none")]
    pub busiest_host: Option<String>,
    #[serde(deserialize_with = "number_or_none")]
    pub throttled_s: Option<f64>,
    #[serde(deserialize_with = "whole_or_none")]
    pub throttled_periods: Option<u64>,
}

/// One point of `summary.comparison`: the paths' figures.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ComparisonView {
    #[serde(deserialize_with = "list_or_empty")]
    pub paths: Vec<FigureView>,
}

/// One path's figure in a comparison.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct FigureView {
    #[serde(deserialize_with = "text_or_none")]
    pub path: Option<String>,
    #[serde(deserialize_with = "number_or_none")]
    pub busbw: Option<f64>,
    #[serde(deserialize_with = "number_or_none")]
    pub line_rate_pct: Option<f64>,
}

/// What readers use of `summary.model` (the `collbench model` document): its predictions. Anything without a
/// `predictions` list has none; a list item that is not a prediction makes the list the message naming it.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelView {
    pub predictions: std::result::Result<Vec<PredictionView>, String>,
}

impl Default for ModelView {
    fn default() -> Self {
        ModelView {
            predictions: Ok(Vec::new()),
        }
    }
}

impl<'de> Deserialize<'de> for ModelView {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Raw {
            #[serde(default)]
            predictions: Value,
        }
        let Ok(Raw {
            predictions: Value::Array(list),
        }) = Raw::deserialize(Value::deserialize(d)?)
        else {
            return Ok(ModelView::default());
        };
        let predictions = list
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                PredictionView::deserialize(v)
                    .map_err(|e| format!("collbench.summary.model.predictions[{i}] is not a prediction: {e}"))
            })
            .collect();
        Ok(ModelView { predictions })
    }
}

/// One prediction of the model: a path's collective at a rank count and size.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct PredictionView {
    pub path: String,
    /// Collective by name; predictions hold for every dtype and op of it.
    pub collective: String,
    pub algo: String,
    /// Two-level predictions are left out of the charts.
    #[serde(default)]
    pub hierarchical: bool,
    pub nranks: usize,
    pub size: u64,
    pub time_us: f64,
    pub busbw: f64,
}

fn number_or_none<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<f64>, D::Error> {
    Ok(Value::deserialize(d)?.as_f64())
}

fn whole_or_none<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<u64>, D::Error> {
    Ok(Value::deserialize(d)?.as_u64())
}

fn text_or_none<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<String>, D::Error> {
    Ok(Value::deserialize(d)?.as_str().map(str::to_string))
}

/// `true` only for JSON's `true`.
fn true_or_false<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<bool, D::Error> {
    Ok(Value::deserialize(d)?.as_bool() == Some(true))
}

/// A list whose items are read leniently; anything but a list reads as empty.
fn list_or_empty<'de, D: Deserializer<'de>, T: serde::de::DeserializeOwned>(
    d: D,
) -> std::result::Result<Vec<T>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Array(items) => items.into_iter().filter_map(|v| T::deserialize(v).ok()).collect(),
        _ => Vec::new(),
    })
}
