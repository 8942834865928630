# pint (github.com/cloudflare/pint) settings for the generated rules: `pint -c alerts/pint.hcl lint alerts/cdcwatch.rules.yml`.
# Offline checks only (no Prometheus server): PromQL syntax, templates against the labels each query keeps,
# `for`, aggregations; plus the labels and annotations every cdcwatch alert must carry.
rule {
  match {
    kind = "alerting"
  }
  label "severity" {
    severity = "bug"
    value    = "(critical|warning|info)"
    required = true
  }
  annotation "summary" {
    severity = "bug"
    required = true
  }
  annotation "description" {
    severity = "bug"
    required = true
  }
  annotation "dashboard_url" {
    severity = "bug"
    value    = "(https?://[^\\s]+)?/d/cdcwatch-[a-z]+.*"
    required = true
  }
  annotation "runbook_url" {
    severity = "bug"
    value    = "(https?://[^\\s#]+|[^\\s#:]+)#[a-z]+"
    required = true
  }
}
