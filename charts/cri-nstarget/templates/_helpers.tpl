{{/*
The labels of every object and of the installer's pods: deploy/'s two
(the app's name, the version), and Helm's.
*/}}
{{- define "cri-nstarget.labels" -}}
app.kubernetes.io/name: cri-nstarget-install
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name (.Chart.Version | replace "+" "_") | quote }}
{{- end }}

{{/*
The installer's image: REPOSITORY:TAG, and @DIGEST when one is set, which
is then what is pulled. The tag is the chart's appVersion unless set.
*/}}
{{- define "cri-nstarget.image" -}}
{{- $ref := printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- if .Values.image.digest -}}
{{- $ref = printf "%s@%s" $ref .Values.image.digest -}}
{{- end -}}
{{- $ref -}}
{{- end }}

{{/*
The labels of the plugin mode's objects and pods (mode: plugin):
deploy/plugin's two (its app's name, the version), and Helm's.
*/}}
{{- define "cri-nstarget.pluginLabels" -}}
app.kubernetes.io/name: cri-nstarget-plugin
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name (.Chart.Version | replace "+" "_") | quote }}
{{- end }}
