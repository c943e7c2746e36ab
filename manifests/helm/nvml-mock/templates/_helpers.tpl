{{/*
Names, labels, the image reference, and the render-time checks that
values.schema.json cannot express.
*/}}

{{/* The chart name, or nameOverride. */}}
{{- define "nvml-mock.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The full name: fullnameOverride; else the release name when it already
contains the chart name; else <release>-<chart name>. Truncated to 63 (DNS
label); the NRI DaemonSet appends "-nri", so names are cut to 59 first.
*/}}
{{- define "nvml-mock.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 59 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 59 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 59 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The name of the topology ConfigMap, which the stager watches. */}}
{{- define "nvml-mock.topologyName" -}}
{{- printf "%s-topology" (include "nvml-mock.fullname" .) }}
{{- end }}

{{/* chart label value: <name>-<version>. */}}
{{- define "nvml-mock.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels every object carries. */}}
{{- define "nvml-mock.labels" -}}
helm.sh/chart: {{ include "nvml-mock.chart" . }}
{{ include "nvml-mock.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The stager's selector. */}}
{{- define "nvml-mock.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nvml-mock.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels of the NRI objects: a distinct name so that selecting the stager never selects the plugin. */}}
{{- define "nvml-mock.nriLabels" -}}
helm.sh/chart: {{ include "nvml-mock.chart" . }}
{{ include "nvml-mock.nriSelectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The NRI plugin's selector. */}}
{{- define "nvml-mock.nriSelectorLabels" -}}
app.kubernetes.io/name: {{ include "nvml-mock.name" . }}-nri
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: nri
{{- end }}

{{/* The image reference: repository@digest when a digest is set, else repository:tag (tag defaults to appVersion). */}}
{{- define "nvml-mock.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
The DaemonSets' updateStrategy. OnDelete drops the rollingUpdate block (the
API rejects it there), so `--set updateStrategy.type=OnDelete` is enough.
*/}}
{{- define "nvml-mock.updateStrategy" -}}
{{- with .Values.updateStrategy }}
updateStrategy:
{{- if eq (.type | default "RollingUpdate") "OnDelete" }}
  type: OnDelete
{{- else }}
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
{{- end }}

{{/* The NRI plugin index as two digits, whether given as "10" or 10. */}}
{{- define "nvml-mock.nriPluginIndex" -}}
{{- $index := .Values.nri.pluginIndex }}
{{- if kindIs "string" $index }}
{{- $index }}
{{- else }}
{{- printf "%02d" (int $index) }}
{{- end }}
{{- end }}

{{/* The GPU profile document: customConfig, else profiles/<profile>.yaml. */}}
{{- define "nvml-mock.profile" -}}
{{- if .Values.gpu.customConfig }}
{{- .Values.gpu.customConfig }}
{{- else }}
{{- $path := printf "profiles/%s.yaml" .Values.gpu.profile }}
{{- $profile := .Files.Get $path }}
{{- if not $profile }}
{{- fail (printf "gpu.profile %q: the chart has no %s; use one of the shipped profiles or set gpu.customConfig" .Values.gpu.profile $path) }}
{{- end }}
{{- $profile }}
{{- end }}
{{- end }}

{{/*
Checks across values that the schema cannot compare. Included by every
template that depends on them, so any render fails the same way.
*/}}
{{- define "nvml-mock.validate" -}}
{{- $channels := .Values.imex.mockChannels }}
{{- if eq (int $channels.channelMajor) (int $channels.capsMajor) }}
{{- fail (printf "imex.mockChannels.channelMajor and imex.mockChannels.capsMajor are both %d: the IMEX channel and caps devices need two different majors" (int $channels.channelMajor)) }}
{{- end }}
{{- if .Values.topology.enabled }}
{{- $seen := dict }}
{{- $uuids := dict }}
{{- range $domain := .Values.topology.domains }}
{{- $uuid := $domain.uuid | lower | replace "-" "" }}
{{- if hasKey $uuids $uuid }}
{{- fail (printf "topology: domains %s and %s share the uuid %s: each NVLink domain needs its own uuid" (get $uuids $uuid) ($domain.name | default $domain.uuid | quote) $domain.uuid) }}
{{- end }}
{{- $_ := set $uuids $uuid ($domain.name | default $domain.uuid | quote) }}
{{- $ids := dict }}
{{- range $clique := $domain.cliques }}
{{- $id := printf "%d" (int64 $clique.id) }}
{{- if hasKey $ids $id }}
{{- fail (printf "topology: domain %s lists clique %s twice: give each clique of a domain its own id" ($domain.name | default $domain.uuid | quote) $id) }}
{{- end }}
{{- $_ := set $ids $id true }}
{{- range $node := $clique.nodes }}
{{- $where := printf "domain %s clique %d" ($domain.name | default $domain.uuid | quote) (int64 $clique.id) }}
{{- if hasKey $seen $node }}
{{- if eq (get $seen $node) $where }}
{{- fail (printf "topology: node %q is listed twice in %s: list each node in exactly one clique" $node $where) }}
{{- end }}
{{- fail (printf "topology: node %q appears in two cliques (%s and %s): list each node in exactly one clique" $node (get $seen $node) $where) }}
{{- end }}
{{- $_ := set $seen $node $where }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
