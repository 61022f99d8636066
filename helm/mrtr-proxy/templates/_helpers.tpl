{{/* Names and labels. */}}
{{- define "mrtr-proxy.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "mrtr-proxy.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The headless Service's name; "-peers" is appended after truncation so it is never cut off. */}}
{{- define "mrtr-proxy.peersName" -}}
{{- printf "%s-peers" (include "mrtr-proxy.fullname" . | trunc 57 | trimSuffix "-") -}}
{{- end -}}

{{- define "mrtr-proxy.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "mrtr-proxy.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mrtr-proxy.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "mrtr-proxy.labels" -}}
helm.sh/chart: {{ include "mrtr-proxy.chart" . }}
{{ include "mrtr-proxy.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: {{ .Values.mode }}
{{- end -}}

{{- define "mrtr-proxy.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "mrtr-proxy.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "mrtr-proxy.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "mrtr-proxy.configMapName" -}}
{{- printf "%s-config" (include "mrtr-proxy.fullname" . | trunc 56 | trimSuffix "-") -}}
{{- end -}}

{{/*
Which keys of your Secret are mounted, under which file names (YAML list, or empty: every key). The staged
rotation values name Secret keys for the roles: current -> 0-current, previous -> 1-previous, next -> 2-next
(the proxy reads the role from the file name: a `next` key unseals but does not seal).
*/}}
{{- define "mrtr-proxy.keyItems" -}}
{{- $r := .Values.keys.rotation | default dict -}}
{{- if and .Values.keys.existingSecret (or $r.current $r.next $r.previous) -}}
{{- $items := list (dict "key" $r.current "path" "0-current") -}}
{{- if $r.previous }}{{ $items = append $items (dict "key" $r.previous "path" "1-previous") }}{{ end -}}
{{- if $r.next }}{{ $items = append $items (dict "key" $r.next "path" "2-next") }}{{ end -}}
{{- toYaml $items -}}
{{- else if and .Values.keys.existingSecret .Values.keys.existingSecretItems -}}
{{- toYaml .Values.keys.existingSecretItems -}}
{{- end -}}
{{- end -}}

{{/* The Secret that holds the key ring: yours (keys.existingSecret) or the generated one. */}}
{{- define "mrtr-proxy.keysSecretName" -}}
{{- if .Values.keys.existingSecret -}}
{{- .Values.keys.existingSecret -}}
{{- else -}}
{{- printf "%s-keys" (include "mrtr-proxy.fullname" . | trunc 58 | trimSuffix "-") -}}
{{- end -}}
{{- end -}}

{{/*
The proxy configuration: .Values.config merged over the chart's defaults, as YAML.
Lists (upstreams, keys.dirs) in .Values.config replace the defaults; maps merge key by key.
*/}}
{{- define "mrtr-proxy.config" -}}
{{- $replica := dict "peer_port" (int .Values.peer.port) -}}
{{- if eq .Values.mode "gateway" -}}
{{/* every pod's peer port, through the headless Service: key-ring agreement (/readyz) */}}
{{- $_ := set $replica "peers" (list (printf "%s:%d" (include "mrtr-proxy.peersName" .) (int .Values.peer.port))) -}}
{{- end -}}
{{- $keys := dict "dirs" (list .Values.keys.mountPath) -}}
{{- if not (kindIs "invalid" .Values.keys.promoteAfterSeconds) -}}
{{- $_ := set $keys "promote_after_s" .Values.keys.promoteAfterSeconds -}}
{{- end -}}
{{- $defaults := dict
  "listen" (dict "host" "0.0.0.0" "port" 8080)
  "replica" $replica
  "keys" $keys
  "logging" (dict "format" "json")
  "calls" (dict "drain_grace_s" (int .Values.drain.graceSeconds)) -}}
{{- if .Values.admin.enabled -}}
{{- $_ := set $defaults "admin" (dict "listen" (printf "0.0.0.0:%d" (int .Values.admin.port)) "token_file" (printf "/etc/mrtr-proxy/admin/%s" .Values.admin.tokenKey)) -}}
{{- end -}}
{{- if eq .Values.mode "sidecar" -}}
{{- $url := printf "http://127.0.0.1:%d%s" (int .Values.sidecar.upstreamPort) .Values.sidecar.upstreamPath -}}
{{- $_ := set $defaults "upstreams" (list (dict "name" "default" "url" $url)) -}}
{{- end -}}
{{- $auth := .Values.auth | default dict -}}
{{- if $auth.publicUrl -}}
{{- $_ := set $defaults "listen" (merge (dict "public_url" $auth.publicUrl) $defaults.listen) -}}
{{- end -}}
{{- $config := mustMergeOverwrite $defaults (deepCopy (.Values.config | default dict)) -}}
{{- if $auth.jwksUrl -}}
{{- range $config.upstreams -}}
{{- $up := . -}}
{{- if and $up.auth (eq (toString $up.auth.mode) "validate") (not $up.auth.jwks_url) (not $up.auth.jwks_file) -}}
{{- $_ := set $up.auth "jwks_url" $auth.jwksUrl -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $config -}}
{{- end -}}

{{- define "mrtr-proxy.listenPort" -}}
{{- $config := include "mrtr-proxy.config" . | fromYaml -}}
{{- int $config.listen.port -}}
{{- end -}}

{{/* Stops the render with a clear message when the values cannot make a working proxy. */}}
{{- define "mrtr-proxy.validate" -}}
{{- $config := include "mrtr-proxy.config" . | fromYaml -}}
{{- $calls := (.Values.config | default dict).calls | default dict -}}
{{- if and (hasKey $calls "drain_grace_s") (ne (toString $calls.drain_grace_s) (toString .Values.drain.graceSeconds)) -}}
{{- fail "config.calls.drain_grace_s: the chart sets it from drain.graceSeconds (so terminationGracePeriodSeconds stays longer than the drain); set drain.graceSeconds instead" -}}
{{- end -}}
{{- if not $config.upstreams -}}
{{- fail "config.upstreams: at least one upstream is needed in gateway mode (e.g. config.upstreams[0] = {name: search, url: http://search:8000/mcp})" -}}
{{- end -}}
{{- /* A route naming an upstream the config does not define: refused here, at render time (and by helm
lint), not only when the pod starts. The proxy's own words (proxy/config/schema.py). */ -}}
{{- $names := list -}}
{{- range $config.upstreams -}}{{- $names = append $names (toString .name) -}}{{- end -}}
{{- range $i, $route := $config.routes | default list -}}
{{- range $j, $member := $route.upstreams | default list -}}
{{- $name := $member -}}
{{- if kindIs "map" $member -}}{{- $name = $member.upstream -}}{{- end -}}
{{- if not (has (toString $name) $names) -}}
{{- fail (printf "config.routes.%d.upstreams.%d: route %s names upstream %s, which config.upstreams does not define (it has: %s)" $i $j (toString $route.name | quote) (toString $name | quote) (join ", " $names)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $host := toString $config.listen.host -}}
{{- if or (hasPrefix "127." $host) (eq $host "localhost") (eq $host "::1") -}}
{{- fail (printf "config.listen.host: %s is loopback; the kubelet's probes and the Services could not reach the proxy (use 0.0.0.0 or ::)" $host) -}}
{{- end -}}
{{- $port := int $config.listen.port -}}
{{- if eq $port (int .Values.peer.port) -}}
{{- fail (printf "peer.port: %d is also config.listen.port; the peer-forwarding port must differ" $port) -}}
{{- end -}}
{{- if and (eq .Values.mode "sidecar") (eq $port (int .Values.sidecar.upstreamPort)) -}}
{{- fail (printf "config.listen.port: %d is also sidecar.upstreamPort; the proxy and the legacy server share the pod's network" $port) -}}
{{- end -}}
{{- if and .Values.admin.enabled (not .Values.admin.tokenSecret) -}}
{{- fail "admin.enabled: set admin.tokenSecret, a Secret holding the admin bearer token under admin.tokenKey" -}}
{{- end -}}
{{- if and .Values.admin.enabled (has (int .Values.admin.port) (list $port (int .Values.peer.port))) -}}
{{- fail (printf "admin.port: %d is also the listen or the peer port; it must differ" (int .Values.admin.port)) -}}
{{- end -}}
{{- $rot := .Values.keys.rotation | default dict -}}
{{- if and (or $rot.current $rot.next $rot.previous) (not .Values.keys.existingSecret) -}}
{{- fail "keys.rotation names keys of keys.existingSecret: set keys.existingSecret too" -}}
{{- end -}}
{{- if and (or $rot.next $rot.previous) (not $rot.current) -}}
{{- fail "keys.rotation: set keys.rotation.current (the key that seals) as well as next/previous" -}}
{{- end -}}
{{- if and $rot.current .Values.keys.existingSecretItems -}}
{{- fail "keys.rotation and keys.existingSecretItems both say which keys to mount: use one" -}}
{{- end -}}
{{- if not (or .Values.keys.existingSecret .Values.keys.generate) -}}
{{- fail "keys: set keys.existingSecret (recommended) or keys.generate=true; without a key ring parked calls could not move between replicas or survive a restart" -}}
{{- end -}}
{{- $dirs := list -}}
{{- if $config.keys -}}{{- $dirs = $config.keys.dirs | default list -}}{{- end -}}
{{- if not (has .Values.keys.mountPath $dirs) -}}
{{- fail (printf "config.keys.dirs: must include keys.mountPath (%s), where the key Secret is mounted" .Values.keys.mountPath) -}}
{{- end -}}
{{- end -}}

{{/* What the pod spec mounts from the key Secret; hashed into checksum/secret. */}}
{{- define "mrtr-proxy.secretRef" -}}
secretName: {{ include "mrtr-proxy.keysSecretName" . }}
generated: {{ not .Values.keys.existingSecret }}
mountPath: {{ .Values.keys.mountPath }}
{{- with include "mrtr-proxy.keyItems" . }}
items:
  {{- . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
The proxy container, shared by the gateway Deployment and the sidecar snippet in NOTES.txt.
Call with (dict "root" $ "sidecar" true|false).
*/}}
{{- define "mrtr-proxy.container" -}}
{{- $root := .root -}}
{{- $http := ternary "mrtr-http" "http" .sidecar -}}
{{- $peer := ternary "mrtr-peer" "peer" .sidecar -}}
{{- $port := include "mrtr-proxy.listenPort" $root | int -}}
name: mrtr-proxy
image: {{ include "mrtr-proxy.image" $root | quote }}
imagePullPolicy: {{ $root.Values.image.pullPolicy }}
args: ["serve", "--config", "/etc/mrtr-proxy/config/config.yaml"]
ports:
  - name: {{ $http }}
    containerPort: {{ $port }}
    protocol: TCP
  - name: {{ $peer }}
    containerPort: {{ int $root.Values.peer.port }}
    protocol: TCP
  {{- if $root.Values.admin.enabled }}
  - name: {{ ternary "mrtr-admin" "admin" .sidecar }}
    containerPort: {{ int $root.Values.admin.port }}
    protocol: TCP
  {{- end }}
env:
  - name: POD_IP
    valueFrom:
      fieldRef:
        fieldPath: status.podIP
  # Handles name this address as the owner of a parked call: other replicas forward retries to its peer port.
  - name: MRTR_PROXY_REPLICA_ADDRESS
    {{- $peerPort := int $root.Values.peer.port }}
    value: {{ ternary (printf "[$(POD_IP)]:%d" $peerPort) (printf "$(POD_IP):%d" $peerPort) $root.Values.replica.ipv6 | quote }}
  {{- with $root.Values.extraEnv }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
startupProbe:
  httpGet:
    path: /healthz
    port: {{ $http }}
  {{- toYaml $root.Values.probes.startup | nindent 2 }}
livenessProbe:
  httpGet:
    path: /healthz
    port: {{ $http }}
  {{- toYaml $root.Values.probes.liveness | nindent 2 }}
readinessProbe:
  httpGet:
    path: /readyz
    port: {{ $http }}
  {{- toYaml $root.Values.probes.readiness | nindent 2 }}
{{- with $root.Values.resources }}
resources:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml $root.Values.securityContext | nindent 2 }}
volumeMounts:
  - name: mrtr-proxy-config
    mountPath: /etc/mrtr-proxy/config
    readOnly: true
  - name: mrtr-proxy-keys
    mountPath: {{ $root.Values.keys.mountPath }}
    readOnly: true
  - name: mrtr-proxy-tmp
    mountPath: /tmp
  {{- if $root.Values.admin.enabled }}
  - name: mrtr-proxy-admin
    mountPath: /etc/mrtr-proxy/admin
    readOnly: true
  {{- end }}
  {{- range (($root.Values.auth | default dict).secretMounts | default list) }}
  - name: mrtr-proxy-secret-{{ .name }}
    mountPath: /etc/mrtr-proxy/secrets/{{ .name }}
    readOnly: true
  {{- end }}
  {{- with $root.Values.extraVolumeMounts }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end -}}

{{/* The pod volumes the container mounts. */}}
{{- define "mrtr-proxy.volumes" -}}
- name: mrtr-proxy-config
  configMap:
    name: {{ include "mrtr-proxy.configMapName" . }}
- name: mrtr-proxy-keys
  secret:
    secretName: {{ include "mrtr-proxy.keysSecretName" . }}
    defaultMode: 288  # 0440: the owner and the pod's fsGroup read
    {{- with include "mrtr-proxy.keyItems" . }}
    items:
      {{- . | nindent 6 }}
    {{- end }}
- name: mrtr-proxy-tmp
  emptyDir:
    sizeLimit: 16Mi
{{- if .Values.admin.enabled }}
- name: mrtr-proxy-admin
  secret:
    secretName: {{ .Values.admin.tokenSecret }}
    defaultMode: 288  # 0440
    items:
      - {key: {{ .Values.admin.tokenKey }}, path: {{ .Values.admin.tokenKey }}}
{{- end }}
{{- range ((.Values.auth | default dict).secretMounts | default list) }}
- name: mrtr-proxy-secret-{{ .name }}
  secret:
    secretName: {{ .secretName }}
    defaultMode: 288  # 0440
    {{- with .items }}
    items:
      {{- toYaml . | nindent 6 }}
    {{- end }}
{{- end }}
{{- with .Values.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* PromQL label matchers for this release's series (metrics.prometheusRule.selector, or what the
ServiceMonitor's scrapes carry: the namespace and the headless Service's name). */}}
{{- define "mrtr-proxy.metricsSelector" -}}
{{- if .Values.metrics.prometheusRule.selector -}}
{{- .Values.metrics.prometheusRule.selector -}}
{{- else -}}
{{- printf "namespace=%q,service=%q" .Release.Namespace (include "mrtr-proxy.peersName" .) -}}
{{- end -}}
{{- end -}}
