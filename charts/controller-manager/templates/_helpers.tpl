{{/* Chart name, possibly overridden. */}}
{{- define "controller-manager.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: the release name, prefixed with the chart name unless it already contains it. */}}
{{- define "controller-manager.fullname" -}}
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

{{- define "controller-manager.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "controller-manager.selectorLabels" -}}
app.kubernetes.io/name: {{ include "controller-manager.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "controller-manager.labels" -}}
helm.sh/chart: {{ include "controller-manager.chart" . }}
{{ include "controller-manager.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "controller-manager.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "controller-manager.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "controller-manager.leaseNamespace" -}}
{{- default .Release.Namespace .Values.leaderElection.namespace }}
{{- end }}

{{/*
The enabled controllers' canonical names (value key + "-controller"), sorted, as a JSON list.
Every key must be one the chart knows (files/rbac-rules.yaml); the schema enforces it too.
*/}}
{{- define "controller-manager.enabledControllers" -}}
{{- $known := (.Files.Get "files/rbac-rules.yaml" | fromYaml).controllers }}
{{- $enabled := list }}
{{- range $key := keys .Values.controllers | sortAlpha }}
{{- $name := printf "%s-controller" $key }}
{{- if not (hasKey $known $name) }}
{{- fail (printf "controllers.%s: not a controller this chart knows" $key) }}
{{- end }}
{{- if (index $.Values.controllers $key).enabled }}
{{- $enabled = append $enabled $name }}
{{- end }}
{{- end }}
{{- toJson $enabled }}
{{- end }}
