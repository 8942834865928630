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

{{/* The deployment's stages (files/mixin/stages.json: the mixin's, in shape-bit order) as JSON, stage → on: each
     `stages` value true or false as given; `auto` on when `config` has an entry in the stage's section (one with its
     key set, for connect_jmx), or when the chart value it follows is true (spark: podMonitor.enabled). */}}
{{- define "cdcwatch.stages" -}}
{{- $spec := .Files.Get "files/mixin/stages.json" | fromJson }}
{{- $given := .Values.stages | default dict }}
{{- $on := dict }}
{{- range $stage := $spec.stages }}
{{- $value := index $given $stage }}
{{- $source := index $spec.sources $stage }}
{{- if kindIs "bool" $value }}
{{- $_ := set $on $stage $value }}
{{- else if $source.section }}
{{- $found := false }}
{{- range (index ($.Values.config | default dict) $source.section | default list) }}
{{- if or (not $source.key) (and (kindIs "map" .) (index . $source.key)) }}{{ $found = true }}{{ end }}
{{- end }}
{{- $_ := set $on $stage $found }}
{{- else }}
{{- $chartValue := $.Values }}
{{- range splitList "." $source.value }}{{ $chartValue = index $chartValue . }}{{ end }}
{{- $_ := set $on $stage (eq (toString $chartValue) "true") }}
{{- end }}
{{- end }}
{{- toJson $on }}
{{- end }}

{{/* The shape number of the deployment's stages: bit i set when the i-th stage of files/mixin/stages.json is on. */}}
{{- define "cdcwatch.shape" -}}
{{- $spec := .Files.Get "files/mixin/stages.json" | fromJson }}
{{- $on := include "cdcwatch.stages" . | fromJson }}
{{- $shape := 0 }}{{- $bit := 1 }}
{{- range $spec.stages }}
{{- if index $on . }}{{ $shape = add $shape $bit }}{{ end }}
{{- $bit = mul $bit 2 }}
{{- end }}
{{- $shape }}
{{- end }}

{{/* One shaped text of files/mixin/ (cdcwatch/mixin/kubernetes.py writes them) for a shape: (list TEXT SHAPE). Its
     chunks whose mask has the shape, joined: exactly what `cdcwatch mixin generate` writes for those stages. A
     mask is 64 hexadecimal digits, digit k bit j for shape 4k+j. */}}
{{- define "cdcwatch.shaped" -}}
{{- $bundle := index . 0 | fromJson }}
{{- $shape := index . 1 | int }}
{{- $digit := div $shape 4 | int }}
{{- $bit := index (list 1 2 4 8) (mod $shape 4 | int) }}
{{- $hex := dict "0" 0 "1" 1 "2" 2 "3" 3 "4" 4 "5" 5 "6" 6 "7" 7 "8" 8 "9" 9 "a" 10 "b" 11 "c" 12 "d" 13 "e" 14 "f" 15 }}
{{- $on := list }}
{{- range $bundle.masks }}
{{- $on = append $on (eq (mod (div (get $hex (substr $digit (add1 $digit | int) .)) $bit) 2 | int) 1) }}
{{- end }}
{{- range $bundle.chunks }}
{{- if index $on (index . 0 | int) }}{{ index $bundle.texts (index . 1 | int) }}{{ end }}
{{- end }}
{{- end }}

{{/* The runbook links of generated text (rules: runbook_url, dashboards: their panels' links) at
     prometheusRule.runbookBaseUrl, when set. */}}
{{- define "cdcwatch.withRunbook" -}}
{{- $text := index . 0 }}{{- $values := index . 1 }}
{{- with $values.prometheusRule.runbookBaseUrl }}
{{- $text = regexReplaceAll "(?m)^(\\s+runbook_url: )[^#\\n]*#" $text (printf "${1}%s#" .) }}
{{- $text = regexReplaceAll "(\"url\": \")[^\"#]*#" $text (printf "${1}%s#" .) }}
{{- end }}
{{- $text }}
{{- end }}

{{/* The stages that are on, comma-separated, in pipeline order ("" when none is). */}}
{{- define "cdcwatch.stageList" -}}
{{- $spec := .Files.Get "files/mixin/stages.json" | fromJson }}
{{- $on := include "cdcwatch.stages" . | fromJson }}
{{- $list := list }}
{{- range $spec.stages }}{{ if index $on . }}{{ $list = append $list . }}{{ end }}{{ end }}
{{- join "," $list }}
{{- end }}

{{/* The rules text with prometheusRule's overrides, as kube-prometheus-stack's defaultRules takes them: the alerts
     of `disabled` left out; `additionalRuleLabels` on every alert; per alert of `customRules`, its `for`, its
     `severity` and its `labels`. Recording rules are left as they are (a label there would change the series the
     alerts join on). Without an override the text is returned as generated. */}}
{{- define "cdcwatch.ruleOverrides" -}}
{{- $text := index . 0 }}{{- $values := index . 1 }}
{{- $disabled := $values.disabled | default dict }}
{{- $custom := $values.customRules | default dict }}
{{- $extra := $values.additionalRuleLabels | default dict }}
{{- if or $disabled $custom $extra }}
{{- $groups := list }}
{{- range (fromYaml $text).groups }}
{{- $rules := list }}
{{- range .rules }}
{{- if not .alert }}
{{- $rules = append $rules . }}
{{- else if not (index $disabled .alert) }}
{{- $rule := deepCopy . }}
{{- $own := index $custom .alert | default dict }}
{{- $labels := mergeOverwrite (deepCopy (.labels | default dict)) (deepCopy $extra) (deepCopy ($own.labels | default dict)) }}
{{- with $own.severity }}{{ $_ := set $labels "severity" . }}{{ end }}
{{- $_ := set $rule "labels" $labels }}
{{- with (get $own "for") }}
{{- $for := . }}
{{- /* the annotations say the generated `for` ("for 10m"): they say the new one */}}
{{- $said := printf "\\bfor %s\\b" (get $rule "for" | default "never") }}
{{- $annotations := dict }}
{{- range $key, $text := ($rule.annotations | default dict) }}
{{- $_ := set $annotations $key (regexReplaceAll $said $text (printf "for %s" $for)) }}
{{- end }}
{{- $_ := set $rule "annotations" $annotations }}
{{- $_ := set $rule "for" $for }}
{{- end }}
{{- $rules = append $rules $rule }}
{{- end }}
{{- end }}
{{- if $rules }}
{{- $groups = append $groups (set (deepCopy .) "rules" $rules) }}
{{- end }}
{{- end }}
{{- toYaml (dict "groups" $groups) }}
{{- else }}
{{- $text }}
{{- end }}
{{- end }}
