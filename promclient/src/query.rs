//! Range queries against Prometheus's HTTP API, and reading their matrix answers.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::{Client, ErrorKind, Url, encode};

/// One series of a matrix answer: its labels and (time, value) points.
pub type MatrixSeries = (BTreeMap<String, String>, Vec<(f64, f64)>);

/// A `query_range` answer, read into types directly (a generic JSON tree of a large answer
/// takes many times its size).
#[derive(serde::Deserialize)]
struct Answer<'a> {
    status: String,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default, borrow)]
    data: Option<Data<'a>>,
}

#[derive(serde::Deserialize)]
struct Data<'a> {
    #[serde(rename = "resultType")]
    result_type: String,
    #[serde(borrow)]
    result: &'a serde_json::value::RawValue,
}

#[derive(serde::Deserialize)]
struct Item {
    metric: BTreeMap<String, String>,
    values: Vec<(f64, String)>,
}

/// Reads a `query_range` answer.
pub fn parse_matrix(body: &str) -> Result<Vec<MatrixSeries>, String> {
    let a: Answer =
        serde_json::from_str(body).map_err(|e| format!("the answer is not JSON ({e})"))?;
    if a.status != "success" {
        return Err(format!(
            "{}: {}",
            a.error_type.as_deref().unwrap_or("error"),
            a.error.as_deref().unwrap_or("no message")
        ));
    }
    let data = a.data.ok_or("the answer has no data")?;
    if data.result_type != "matrix" {
        return Err(format!("expected a matrix, got {:?}", data.result_type));
    }
    let items: Vec<Item> = serde_json::from_str(data.result.get())
        .map_err(|e| format!("a malformed result list ({e})"))?;
    let mut out = Vec::with_capacity(items.len());
    for r in items {
        let mut points = Vec::with_capacity(r.values.len());
        for (t, s) in r.values {
            let x = match s.as_str() {
                "NaN" => f64::NAN,
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                _ => s.parse().map_err(|_| {
                    format!("bad value {:?}", s.chars().take(40).collect::<String>())
                })?,
            };
            points.push((t, x));
        }
        out.push((r.metric, points));
    }
    Ok(out)
}

/// A failed query: bad input (Prometheus refused the query), an answer over the byte
/// budget, or the server's trouble.
#[derive(Debug)]
pub enum QueryError {
    Refused(String),
    TooLarge,
    Failed(String),
}

/// A range query's window: Unix seconds, and the step in seconds.
#[derive(Clone, Copy, Debug)]
pub struct Range {
    pub start: f64,
    pub end: f64,
    pub step: f64,
}

/// `/api/v1/query_range`, answered within `timeout`. `budget`: answer bytes still allowed;
/// what this answer takes is subtracted.
pub fn query_range(
    client: &Client,
    url: &Url,
    promql: &str,
    range: Range,
    budget: &mut usize,
    timeout: Duration,
) -> Result<Vec<MatrixSeries>, QueryError> {
    let path = format!(
        "/api/v1/query_range?query={}&start={:.3}&end={:.3}&step={:.3}",
        encode(promql),
        range.start,
        range.end,
        range.step
    );
    let r = client
        .get(url, &path, &[], timeout, *budget)
        .map_err(|e| match e.kind {
            ErrorKind::TooLarge => QueryError::TooLarge,
            // A setup mistake (wrong CA, plain HTTP on the port), not the server's trouble.
            ErrorKind::Tls => QueryError::Refused(format!("Prometheus at {}: {e}", url.display())),
            _ => QueryError::Failed(format!("Prometheus at {}: {e}", url.display())),
        })?;
    *budget = budget.saturating_sub(r.body.len());
    let parsed = parse_matrix(&r.body);
    match (r.status, parsed) {
        (200, Ok(m)) => Ok(m),
        (400 | 422, Err(e)) => Err(QueryError::Refused(format!(
            "Prometheus refused `{promql}`: {e}"
        ))),
        (code, Err(e)) => Err(QueryError::Failed(format!(
            "Prometheus at {} answered {code}: {e}",
            url.display()
        ))),
        (code, Ok(_)) => Err(QueryError::Failed(format!(
            "Prometheus at {} answered {code}",
            url.display()
        ))),
    }
}
