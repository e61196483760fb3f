{{/*
The labels Helm's own conventions add to every object of the release, beside the object's own
(those of the kustomize tree). tests/installer/test_chart.py drops exactly these before it
compares a render with its overlay's. None of them is in the pod template: a new chart version
alone must not roll the pods (docs/install.md, upgrades).
*/}}
{{- define "cni-delguard.helmLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{/*
One of the plain objects of the kustomize tree, which tools/generate-chart.py copies into files/:
parsed, placed in the release's namespace (when namespaced) and given Helm's labels beside its
own and the extra ones passed. Call with (dict "top" $ "file" NAME "labels" MAP "cluster" BOOL).
*/}}
{{- define "cni-delguard.object" -}}
{{- $doc := .top.Files.Get (printf "files/%s" .file) | fromYaml -}}
{{- if not .cluster }}{{ $_ := set $doc.metadata "namespace" .top.Release.Namespace }}{{ end -}}
{{- $labels := merge (dict) (include "cni-delguard.helmLabels" .top | fromYaml) (.labels | default dict) ($doc.metadata.labels | default dict) -}}
{{- $_ := set $doc.metadata "labels" $labels -}}
{{- toYaml $doc -}}
{{- end }}

{{/* The layout's row of files/layouts.yaml (generated from cni_delguard/node/layouts.py). */}}
{{- define "cni-delguard.layout" -}}
{{- $all := .Files.Get "files/layouts.yaml" | fromYaml -}}
{{- toYaml (get $all .Values.cni.layout) -}}
{{- end }}

{{/* The root the container sees the host's / at (the installer's and the probe's --root). */}}
{{- define "cni-delguard.root" -}}/host{{- end }}

{{/* repository:tag, or repository@digest. */}}
{{- define "cni-delguard.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}

{{/* --metrics-address: IP:PORT or [IPv6]:PORT; no address: the node's own, [$(HOST_IP)]:PORT
(HOST_IP from the downward API, set in the container's env). */}}
{{- define "cni-delguard.metricsAddress" -}}
{{- $ip := .Values.prometheus.address | default "$(HOST_IP)" -}}
{{- if eq $ip "$(HOST_IP)" }}[{{ $ip }}]:{{ .Values.prometheus.port }}{{ else -}}
{{- if contains ":" $ip }}[{{ $ip }}]{{ else }}{{ $ip }}{{ end }}:{{ .Values.prometheus.port }}
{{- end }}
{{- end }}

{{/* Whether the pod serves metrics: asked for, and not holding (uninstall has no endpoint). */}}
{{- define "cni-delguard.serves" -}}
{{- if and .Values.prometheus.enabled (not .Values.cni.hold) }}true{{ end -}}
{{- end }}

{{/* The container's arguments, as a YAML list: the command, then what the values add. Holding,
the uninstall overlay's command alone (it replaces the installer's, extra arguments with it): the
installer's own flags would make `uninstall` exit 2. */}}
{{- define "cni-delguard.args" -}}
{{- $args := list -}}
{{- if .Values.cni.hold -}}
{{- $args = list "uninstall" "--root" (include "cni-delguard.root" .) "--hold" -}}
{{- else -}}
{{- $args = list "install" "--watch" "--root" (include "cni-delguard.root" .) "--live-file" "/run/cni-delguard/live" -}}
{{- end -}}
{{- if ne .Values.cni.layout "auto" }}{{ $args = concat $args (list "--layout" .Values.cni.layout) }}{{ end -}}
{{- if not .Values.cni.hold -}}
{{- if .Values.cni.uninstall }}{{ $args = append $args "--uninstall-on-stop" }}{{ end -}}
{{- with .Values.mode }}{{ $args = concat $args (list "--mode" .) }}{{ end -}}
{{- if include "cni-delguard.serves" . }}{{ $args = concat $args (list "--metrics-address" (include "cni-delguard.metricsAddress" .)) }}{{ end -}}
{{- $args = concat $args .Values.extraArgs -}}
{{- end -}}
{{- toYaml $args -}}
{{- end }}

{{/* The readiness probe's command: `ready` (or, holding, `ready --uninstalled`) on the same root and layout. */}}
{{- define "cni-delguard.probe" -}}
{{- $cmd := list "/usr/lib/cni-delguard/cni-delguard" "ready" "--root" (include "cni-delguard.root" .) -}}
{{- if .Values.cni.hold }}{{ $cmd = append $cmd "--uninstalled" }}{{ end -}}
{{- if ne .Values.cni.layout "auto" }}{{ $cmd = concat $cmd (list "--layout" .Values.cni.layout) }}{{ end -}}
{{- toYaml $cmd -}}
{{- end }}

{{/* The container's SELinux options: the value, or on OpenShift spc_t (as the openshift overlay). */}}
{{- define "cni-delguard.seLinuxOptions" -}}
{{- $options := .Values.securityContext.seLinuxOptions -}}
{{- if and (not $options) (eq .Values.cni.layout "openshift") }}{{ $options = dict "type" "spc_t" }}{{ end -}}
{{- with $options }}{{ toYaml . }}{{ end -}}
{{- end }}
