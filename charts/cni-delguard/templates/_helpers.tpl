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
own and the extra ones passed. Call with (dict "top" $ "file" NAME "labels" MAP "cluster" BOOL),
or with "text" instead of "file" for an object already read (the rules, rendered).
*/}}
{{- define "cni-delguard.object" -}}
{{- $doc := (.text | default (.top.Files.Get (printf "files/%s" .file))) | fromYaml -}}
{{- if not .cluster }}{{ $_ := set $doc.metadata "namespace" .top.Release.Namespace }}{{ end -}}
{{- $labels := merge (dict) (include "cni-delguard.helmLabels" .top | fromYaml) (.labels | default dict) ($doc.metadata.labels | default dict) -}}
{{- $_ := set $doc.metadata "labels" $labels -}}
{{- toYaml $doc -}}
{{- end }}

{{/*
The alerting rules' template (files/prometheusrule.yaml, a copy of the monitoring component's
prometheusrule.template.yaml) with its tokens filled in, as delguard_build/rules.py fills
them for the kustomize overlays (tests/installer/test_chart.py compares the two): ${Ni} is N scrape
intervals (prometheus.podMonitor.interval) as a duration in the largest unit that divides it,
${Ni:seconds} the same in seconds, ${interval} the interval as set, ${cluster} and ${cluster,}
the cluster label (prometheus.prometheusRule.clusterLabel) alone and followed by ", ", both empty
when it is, ${namespace} the release's namespace. The Prometheus templates in the annotations
are text here, never rendered by Helm.
*/}}
{{- define "cni-delguard.rules" -}}
{{- $text := .Files.Get "files/prometheusrule.yaml" -}}
{{- $interval := .Values.prometheus.podMonitor.interval -}}
{{- $step := 0 -}}
{{- range regexFindAll "[0-9]+[smh]" $interval -1 -}}
{{- $n := regexFind "^[0-9]+" . | atoi -}}
{{- $unit := get (dict "s" 1 "m" 60 "h" 3600) (regexFind "[smh]$" .) -}}
{{- $step = add $step (mul $n $unit) -}}
{{- end -}}
{{- range regexFindAll `\$\{[0-9]+i(:seconds)?\}` $text -1 | uniq -}}
{{- $total := mul (regexFind "[0-9]+" . | atoi) $step -}}
{{- $value := printf "%ds" $total -}}
{{- if contains ":seconds" . }}{{ $value = printf "%d" $total -}}
{{- else if eq (mod $total 3600) 0 }}{{ $value = printf "%dh" (div $total 3600) -}}
{{- else if eq (mod $total 60) 0 }}{{ $value = printf "%dm" (div $total 60) -}}
{{- end -}}
{{- $text = replace . $value $text -}}
{{- end -}}
{{- $cluster := .Values.prometheus.prometheusRule.clusterLabel -}}
{{- $text = replace "${interval}" $interval $text -}}
{{- $text = replace "${cluster,}" (ternary (printf "%s, " $cluster) "" (ne $cluster "")) $text -}}
{{- $text = replace "${cluster}" $cluster $text -}}
{{- $text = replace "${namespace}" .Release.Namespace $text -}}
{{- $text -}}
{{- end }}

{{/* The layout's row of files/layouts.yaml (generated from cni_delguard/host/layouts.py). */}}
{{- define "cni-delguard.layout" -}}
{{- $all := .Files.Get "files/layouts.yaml" | fromYaml -}}
{{- toYaml (get $all .Values.cni.layout) -}}
{{- end }}

{{/* The root the container sees the host's / at (the installer's and the probe's --root). */}}
{{- define "cni-delguard.root" -}}/host{{- end }}

{{/* repository:tag, or repository@digest. The repository has no default: the image is the one
the user built and pushed (tools/build-image.sh), and a render without it fails here, by name. */}}
{{- define "cni-delguard.image" -}}
{{- $repository := required "image.repository is not set: build and push the image (tools/build-image.sh, docs/install.md) where your nodes pull from, then pass --set image.repository=REGISTRY/cni-delguard" .Values.image.repository -}}
{{- if .Values.image.digest -}}
{{ $repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ $repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
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
{{- if .Values.cni.purge }}{{ $args = append $args "--purge" }}{{ end -}}
{{- else -}}
{{- $args = list "install" "--watch" "--root" (include "cni-delguard.root" .) "--live-file" "/run/cni-delguard/live" -}}
{{- end -}}
{{- if ne .Values.cni.layout "auto" }}{{ $args = concat $args (list "--layout" .Values.cni.layout) }}{{ end -}}
{{- if not .Values.cni.hold -}}
{{- if .Values.cni.uninstall }}{{ $args = append $args "--uninstall-on-stop" }}{{ end -}}
{{- with .Values.mode }}{{ $args = concat $args (list "--mode" .) }}{{ end -}}
{{- with (.Values.kubelet).runtimeRequestTimeout }}{{ $args = concat $args (list "--runtime-request-timeout" .) }}{{ end -}}
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
{{- /* Serving metrics: not Ready while another process holds the port (the monitoring component's). */ -}}
{{- if include "cni-delguard.serves" . }}{{ $cmd = concat $cmd (list "--live-file" "/run/cni-delguard/live") }}{{ end -}}
{{- toYaml $cmd -}}
{{- end }}

{{/* The container's SELinux options: the value, or on OpenShift spc_t (as the openshift overlay). */}}
{{- define "cni-delguard.seLinuxOptions" -}}
{{- $options := .Values.securityContext.seLinuxOptions -}}
{{- if and (not $options) (eq .Values.cni.layout "openshift") }}{{ $options = dict "type" "spc_t" }}{{ end -}}
{{- with $options }}{{ toYaml . }}{{ end -}}
{{- end }}

{{/*
Pod Security: the installer's pods need the privileged level (baseline refuses their host
network and hostPath volumes, and the metrics port, which the host network makes a host port;
their added capabilities are baseline's), and a namespace that enforces baseline or restricted
makes the DaemonSet controller's pod creations fail one by one while `helm install` itself
succeeds: a release with a DaemonSet and no pod. When the release's namespace says so in its
label, the install fails before anything is created, naming the label to set. `lookup` sees the namespace on install,
upgrade and `--dry-run=server` (not in `helm template`). A cluster-wide default (Talos: baseline
everywhere but kube-system) is not visible here: docs/install.md says what to do there.
*/}}
{{- define "cni-delguard.podSecurity" -}}
{{- $ns := lookup "v1" "Namespace" "" .Release.Namespace -}}
{{- $level := "" -}}
{{- with $ns }}{{ $level = get (.metadata.labels | default dict) "pod-security.kubernetes.io/enforce" }}{{ end -}}
{{- if and $level (ne $level "privileged") -}}
{{- fail (printf "namespace %s enforces Pod Security level %q, which refuses the installer's pods (host network, hostPath volumes). Label it privileged first: kubectl label --overwrite namespace %s pod-security.kubernetes.io/enforce=privileged (or install into kube-system)" .Release.Namespace $level .Release.Namespace) -}}
{{- end -}}
{{- end }}

{{/*
The pod's affinity: .Values.affinity, and with controlPlane false a term in each of its
nodeSelectorTerms that keeps the pods off nodes labelled node-role.kubernetes.io/control-plane
(docs/install.md: running there is a choice, and the default, true, is the overlays').
*/}}
{{- define "cni-delguard.affinity" -}}
{{- $affinity := deepCopy (.Values.affinity | default dict) -}}
{{- if not .Values.controlPlane -}}
{{- $off := dict "key" "node-role.kubernetes.io/control-plane" "operator" "DoesNotExist" -}}
{{- $node := get $affinity "nodeAffinity" | default dict -}}
{{- $req := get $node "requiredDuringSchedulingIgnoredDuringExecution" | default dict -}}
{{- $terms := list -}}
{{- range (get $req "nodeSelectorTerms" | default (list (dict))) -}}
{{- $terms = append $terms (set (deepCopy .) "matchExpressions" (append (get . "matchExpressions" | default list) $off)) -}}
{{- end -}}
{{- $_ := set $req "nodeSelectorTerms" $terms -}}
{{- $_ := set $node "requiredDuringSchedulingIgnoredDuringExecution" $req -}}
{{- $_ := set $affinity "nodeAffinity" $node -}}
{{- end -}}
{{- if $affinity }}{{ toYaml $affinity }}{{ end -}}
{{- end }}
