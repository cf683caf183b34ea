{{- define "quanta.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "quanta.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "quanta.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "quanta.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object; pass (dict "root" $ "component" "gateway"). */}}
{{- define "quanta.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
{{ include "quanta.selectorLabels" . }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "quanta.selectorLabels" -}}
app.kubernetes.io/name: {{ include "quanta.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "quanta.image" -}}
{{- $tag := .image.tag | default .root.Chart.AppVersion -}}
image: {{ printf "%s:%s" .image.repository $tag | quote }}
imagePullPolicy: {{ .image.pullPolicy }}
{{- end -}}

{{/* A catalog file path as a TOML string: relative to data.mountPath, or absolute; pass (dict "root" $ "path" P). */}}
{{- define "quanta.dataPath" -}}
{{- ternary .path (printf "%s/%s" .root.Values.data.mountPath .path) (hasPrefix "/" .path) | toJson }}
{{- end -}}

{{/* The embedded Redis's Service for shard i; pass (dict "root" $ "shard" i). Shard 0 keeps
<fullname>-redis (its address before sharding), shard i > 0 has <fullname>-redis-<i>: per-shard
ClusterIP Services, because the StatefulSet's serviceName (immutable) names that ClusterIP Service,
so its pods get no DNS names of their own. */}}
{{- define "quanta.redisShardService" -}}
{{- include "quanta.fullname" .root }}-redis{{ if gt (int .shard) 0 }}-{{ .shard }}{{ end }}
{{- end -}}

{{/* The queue's shards, in order: their Redis URLs as a JSON list (read it with fromJsonArray).
Embedded: one per StatefulSet pod; external: redis.external.url split at commas, as the services
split QUANTA_REDIS_URL (blanks trimmed, empty items dropped); with urlSecret alone, empty. */}}
{{- define "quanta.redisUrls" -}}
{{- $r := .Values.redis -}}
{{- $urls := list -}}
{{- if $r.embedded.enabled -}}
{{- range $i := until (int $r.shards) -}}
{{- $host := ternary "127.0.0.1" (include "quanta.redisShardService" (dict "root" $ "shard" $i)) $.Values.hostNetwork -}}
{{- $urls = append $urls (printf "redis://%s:%d/0" $host (int $r.embedded.port)) -}}
{{- end -}}
{{- else -}}
{{- range splitList "," $r.external.url }}{{ with trim . }}{{ $urls = append $urls . }}{{ end }}{{ end -}}
{{- end -}}
{{- toJson $urls -}}
{{- end -}}

{{/* Several shards: objects per shard are named <name>-<i> and workers carry their shard's label. */}}
{{- define "quanta.sharded" -}}
{{- if gt (int .Values.redis.shards) 1 }}true{{ end -}}
{{- end -}}

{{/* The worker Deployment of shard i (and its autoscaler, PDB); pass (dict "root" $ "shard" i). */}}
{{- define "quanta.workerName" -}}
{{- include "quanta.fullname" .root }}-worker{{ if include "quanta.sharded" .root }}-{{ .shard }}{{ end }}
{{- end -}}

{{/* Its selector: with several shards the shard's label too, so no two Deployments' selectors overlap. */}}
{{- define "quanta.workerSelectorLabels" -}}
{{ include "quanta.selectorLabels" (dict "root" .root "component" "worker") }}
{{- if include "quanta.sharded" .root }}
quanta.io/shard: {{ .shard | toString | quote }}
{{- end }}
{{- end -}}

{{- define "quanta.workerLabels" -}}
{{ include "quanta.labels" (dict "root" .root "component" "worker") }}
{{- if include "quanta.sharded" .root }}
quanta.io/shard: {{ .shard | toString | quote }}
{{- end }}
{{- end -}}

{{/* QUANTA_REDIS_* for every role: the embedded Redis, or the external one with TLS and Sentinel.
Pass (dict "root" $ "shard" i) for a worker (its shard's URL), (dict "root" $) for the gateway
(every shard's, comma-separated, in order). */}}
{{- define "quanta.redisEnv" -}}
{{- $r := .root.Values.redis -}}
{{- $urls := include "quanta.redisUrls" .root | fromJsonArray -}}
{{- if and (not $r.embedded.enabled) $r.external.urlSecret }}
- name: QUANTA_REDIS_URL
  valueFrom: {secretKeyRef: {name: {{ $r.external.urlSecret | quote }}, key: url}}
{{- else }}
- name: QUANTA_REDIS_URL
  {{- if hasKey . "shard" }}
  value: {{ if lt (int .shard) (len $urls) }}{{ index $urls (int .shard) | quote }}{{ else }}""{{ end }}{{/* else check-values says why */}}
  {{- else }}
  value: {{ join "," $urls | quote }}
  {{- end }}
{{- end }}
{{- if not $r.embedded.enabled }}
{{- if $r.external.passwordSecret }}
- name: QUANTA_REDIS_PASSWORD
  valueFrom: {secretKeyRef: {name: {{ $r.external.passwordSecret | quote }}, key: password}}
{{- end }}
{{- if $r.external.tls.secret }}
- name: QUANTA_REDIS_TLS_CA_FILE
  value: /etc/quanta/redis-tls/ca.crt
{{- if $r.external.tls.clientCertificate }}
- name: QUANTA_REDIS_TLS_CERT_FILE
  value: /etc/quanta/redis-tls/tls.crt
- name: QUANTA_REDIS_TLS_KEY_FILE
  value: /etc/quanta/redis-tls/tls.key
{{- end }}
{{- end }}
- name: QUANTA_REDIS_TLS_CHECK_HOSTNAME
  value: {{ ternary "1" "0" $r.external.tls.checkHostname | quote }}
{{- if $r.external.sentinel.enabled }}
- name: QUANTA_REDIS_SENTINELS
  value: {{ join "," $r.external.sentinel.hosts | quote }}
- name: QUANTA_REDIS_SENTINEL_MASTER
  value: {{ $r.external.sentinel.masterName | quote }}
{{- if $r.external.sentinel.passwordSecret }}
- name: QUANTA_REDIS_SENTINEL_PASSWORD
  valueFrom: {secretKeyRef: {name: {{ $r.external.sentinel.passwordSecret | quote }}, key: sentinel-password}}
{{- end }}
{{- end }}
{{- end }}
- name: QUANTA_REDIS_TIMEOUT_S
  value: {{ $r.timeoutSeconds | quote }}
- name: QUANTA_REDIS_CONNECT_TIMEOUT_S
  value: {{ $r.connectTimeoutSeconds | quote }}
{{- end -}}

{{- define "quanta.redisTlsVolume" -}}
{{- if and (not .Values.redis.embedded.enabled) .Values.redis.external.tls.secret }}
- name: redis-tls
  secret: {secretName: {{ .Values.redis.external.tls.secret | quote }}}
{{- end }}
{{- end -}}

{{- define "quanta.redisTlsMount" -}}
{{- if and (not .Values.redis.embedded.enabled) .Values.redis.external.tls.secret }}
- {name: redis-tls, mountPath: /etc/quanta/redis-tls, readOnly: true}
{{- end }}
{{- end -}}

{{- define "quanta.signingSecretName" -}}
{{- .Values.signingKeys.existingSecret | default (printf "%s-signing-keys" (include "quanta.fullname" .)) -}}
{{- end -}}

{{- define "quanta.dataClaimName" -}}
{{- .Values.data.volume.existingClaim | default (printf "%s-data" (include "quanta.fullname" .)) -}}
{{- end -}}

{{/* The data volume, read-only at data.mountPath, for the pods that read the datasets (workers, and
the gateway when it runs first quanta); nothing with data.source=image (the files are in the image). */}}
{{- define "quanta.dataMount" -}}
{{- if eq .Values.data.source "volume" -}}
- {name: data, mountPath: {{ .Values.data.mountPath }}, readOnly: true}
{{- end }}
{{- end -}}

{{- define "quanta.dataVolume" -}}
{{- if eq .Values.data.source "volume" -}}
- name: data
  persistentVolumeClaim: {claimName: {{ include "quanta.dataClaimName" . }}, readOnly: true}
{{- end }}
{{- end -}}

{{/* The pod-level settings every role shares. */}}
{{- define "quanta.podCommon" -}}
automountServiceAccountToken: false
serviceAccountName: {{ include "quanta.fullname" . }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets: {{- toYaml . | nindent 2 }}
{{- end }}
{{- if .Values.hostNetwork }}
hostNetwork: true
dnsPolicy: ClusterFirstWithHostNet
{{- end }}
{{- end -}}
