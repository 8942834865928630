{{/* The chart's name, and the release's object name (at most 63 characters, a DNS label). */}}
{{- define "cdcwatch.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "cdcwatch.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "cdcwatch.selectorLabels" -}}
app.kubernetes.io/name: {{ include "cdcwatch.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "cdcwatch.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "cdcwatch.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "cdcwatch.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "cdcwatch.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Where the pod finds its files: the config (ConfigMap), the web config (Secret). */}}
{{- define "cdcwatch.configDir" -}}/etc/cdcwatch{{- end }}
{{- define "cdcwatch.webDir" -}}/etc/cdcwatch/web{{- end }}
{{- define "cdcwatch.port" -}}10121{{- end }}

{{/* The cdcwatch configuration file: the values' `config`, listening where the Service and probes look. */}}
{{- define "cdcwatch.config" -}}
{{- $listen := dict "address" "0.0.0.0" "port" (include "cdcwatch.port" . | int) }}
{{- if .Values.web.existingSecret }}
{{- $_ := set $listen "web_config_file" (printf "%s/web.yml" (include "cdcwatch.webDir" .)) }}
{{- end }}
{{- toYaml (merge (dict "listen" $listen) (deepCopy .Values.config)) }}
{{- end }}

{{/* Generated text (rules, dashboards) selecting the configured jobs instead of the mixin's defaults
     (job="cdcwatch", job="cdcwatch-spark"). $q is how a double quote is written in that text: `"` in YAML,
     `\"` in JSON. The Spark selector goes through a placeholder, so neither replacement touches the other's. */}}
{{- define "cdcwatch.withJobs" -}}
{{- $text := index . 0 }}{{- $jobs := index . 1 }}{{- $q := index . 2 }}
{{- $spark := printf "job=%scdcwatch-spark%s" $q $q }}
{{- $held := "@@cdcwatch-spark-job@@" }}
{{- $text | replace $spark $held | replace (printf "job=%scdcwatch%s" $q $q) (printf "job=%s%s%s" $q $jobs.exporter $q) | replace $held (printf "job=%s%s%s" $q $jobs.spark $q) }}
{{- end }}
