{{- define "loadtest.fullname" -}}
{{- printf "%s-loadtest" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels; pass (dict "root" $ "component" "master"). */}}
{{- define "loadtest.labels" -}}
app.kubernetes.io/name: quanta-loadtest
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{- define "loadtest.selectorLabels" -}}
app.kubernetes.io/name: quanta-loadtest
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The locustfile's options (QUANTA_LOADTEST_*), the same for master and workers. */}}
{{- define "loadtest.env" -}}
{{- $o := .Values.options }}
- {name: QUANTA_LOADTEST_DATASET, value: {{ $o.dataset | quote }}}
- {name: QUANTA_LOADTEST_WORKLOAD, value: {{ $o.workload | quote }}}
- {name: QUANTA_LOADTEST_ROUNDS, value: {{ $o.rounds | quote }}}
- {name: QUANTA_LOADTEST_PASSES, value: {{ $o.passes | quote }}}
- {name: QUANTA_LOADTEST_SEED, value: {{ $o.seed | quote }}}
- {name: QUANTA_LOADTEST_ENDPOINT, value: {{ $o.endpoint | quote }}}
- {name: QUANTA_LOADTEST_PLAN, value: {{ $o.plan | quote }}}
- {name: QUANTA_LOADTEST_OPTIONAL, value: {{ $o.optional | quote }}}
- {name: QUANTA_LOADTEST_UNREACHABLE_RETRIES, value: {{ $o.unreachableRetries | quote }}}
- {name: QUANTA_LOADTEST_QUERY_TIMEOUT, value: {{ $o.queryTimeout | quote }}}
- {name: LOCUST_USER_CLASSES, value: {{ .Values.userClass | quote }}}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The pod spec both roles share, but the container's args and resources. */}}
{{- define "loadtest.container" -}}
image: {{ printf "%s:%s" .root.Values.image.repository .root.Values.image.tag | quote }}
imagePullPolicy: {{ .root.Values.image.pullPolicy }}
env: {{- include "loadtest.env" .root | nindent 2 }}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities: {drop: [ALL]}
volumeMounts:
  - {name: tmp, mountPath: /tmp}
{{- end -}}
