{{/* Names and labels. */}}
{{- define "mirror.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "mirror.fullname" -}}
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

{{- define "mirror.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "mirror.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component (worker, serve, migrate): call with (list $ "worker"). */}}
{{- define "mirror.selector" -}}
app.kubernetes.io/name: {{ include "mirror.name" (index . 0) }}
app.kubernetes.io/instance: {{ (index . 0).Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "mirror.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "mirror.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "mirror.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "mirror.secretName" -}}
{{- default (include "mirror.fullname" .) .Values.secrets.existingSecret -}}
{{- end -}}

{{/*
Seconds from a mirror duration (`500ms`, `30s`, `10m`, `1h`, `2d` or plain seconds), as
mirror/domain/durations.py reads it, so the chart and the worker agree on the grace.
*/}}
{{- define "mirror.seconds" -}}
{{- $text := toString . | trim | lower -}}
{{- $number := regexFind "^[0-9]+(\\.[0-9]+)?" $text -}}
{{- $unit := trimPrefix $number $text | trim -}}
{{- $per := dict "" 1.0 "s" 1.0 "ms" 0.001 "m" 60.0 "h" 3600.0 "d" 86400.0 -}}
{{- if or (not $number) (not (hasKey $per $unit)) -}}
{{- fail (printf "worker.shutdownGrace: not a duration: %q (use e.g. 30s, 2m)" $text) -}}
{{- end -}}
{{- mulf (float64 $number) (get $per $unit) -}}
{{- end -}}

{{/*
The worker pod's terminationGracePeriodSeconds: MIRROR_SHUTDOWN_GRACE for the running job,
then the 10 s the worker waits for an attempt that does not stop when aborted before it
releases the job itself (mirror/runner/worker.py, abort_wait), then a margin for the
release's own UPDATE and the process exit. Kubernetes sends SIGKILL after it.
*/}}
{{- define "mirror.terminationGracePeriodSeconds" -}}
{{- $grace := float64 (include "mirror.seconds" .Values.worker.shutdownGrace) -}}
{{- $margin := float64 .Values.worker.terminationMarginSeconds -}}
{{- if le $margin 0.0 -}}
{{- fail "worker.terminationMarginSeconds must be positive" -}}
{{- end -}}
{{- addf $grace 10.0 $margin | ceil | int -}}
{{- end -}}

{{/*
A setting's value as the environment holds it: YAML numbers stay whole (Helm reads them
as floats, and 1000000 would print as 1e+06).
*/}}
{{- define "mirror.envValue" -}}
{{- if and (kindIs "float64" .) (eq (floor .) .) -}}
{{- printf "%d" (int64 .) -}}
{{- else -}}
{{- toString . -}}
{{- end -}}
{{- end -}}

{{/* The secret settings' names (keys of secrets.values), sorted. */}}
{{- define "mirror.secretKeys" -}}
{{- keys .Values.secrets.values | sortAlpha | join "," -}}
{{- end -}}

{{/*
Refuse values that would bypass what the chart computes or put a secret in a ConfigMap.
*/}}
{{- define "mirror.checkValues" -}}
{{- $owned := list "MIRROR_CONCURRENCY" "MIRROR_SHUTDOWN_GRACE" "MIRROR_WORK_DIR" -}}
{{- $secret := splitList "," (include "mirror.secretKeys" .) -}}
{{- range $key, $value := .Values.config -}}
{{- if not (hasPrefix "MIRROR_" $key) -}}
{{- fail (printf "config.%s: only MIRROR_* settings belong in config (others: worker.env, serve.env)" $key) -}}
{{- end -}}
{{- if has $key $owned -}}
{{- fail (printf "config.%s: set it through worker.concurrency, worker.shutdownGrace or worker.workDir.mountPath" $key) -}}
{{- end -}}
{{- if has $key $secret -}}
{{- fail (printf "config.%s is a secret: set it under secrets.values (or in secrets.existingSecret)" $key) -}}
{{- end -}}
{{- end -}}
{{- range $key, $value := merge (dict) .Values.worker.env .Values.serve.env -}}
{{- if has $key $owned -}}
{{- fail (printf "%s: set it through worker.concurrency, worker.shutdownGrace or worker.workDir.mountPath" $key) -}}
{{- end -}}
{{- end -}}
{{- if lt (int .Values.worker.concurrency) 1 -}}
{{- fail "worker.concurrency must be at least 1" -}}
{{- end -}}
{{- if and .Values.keda.enabled .Values.keda.scaledJob.enabled -}}
{{- fail "keda.enabled and keda.scaledJob.enabled: choose one (a ScaledObject scales the worker Deployment, a ScaledJob replaces it)" -}}
{{- end -}}
{{- end -}}

{{/* env entries for the secret settings; a key the Secret lacks is left unset. */}}
{{- define "mirror.secretEnv" -}}
{{- range $key := splitList "," (include "mirror.secretKeys" .) }}
- name: {{ $key }}
  valueFrom:
    secretKeyRef:
      name: {{ include "mirror.secretName" $ }}
      key: {{ $key }}
      optional: true
{{- end }}
{{- end -}}

{{/* The environment of a `mirror worker` container (Deployment and ScaledJob alike). */}}
{{- define "mirror.workerEnv" -}}
envFrom:
  - configMapRef:
      name: {{ include "mirror.fullname" . }}
env:
  - name: MIRROR_CONCURRENCY
    value: {{ .Values.worker.concurrency | quote }}
  - name: MIRROR_SHUTDOWN_GRACE
    value: {{ .Values.worker.shutdownGrace | quote }}
  - name: MIRROR_WORK_DIR
    value: {{ .Values.worker.workDir.mountPath | quote }}
  {{- with .Values.worker.videoEncoder }}
  - name: MIRROR_VIDEO_ENCODER
    value: {{ . | quote }}
  {{- end }}
  {{- if gt (int .Values.worker.gpu.nvidia) 0 }}
  # NVIDIA's container runtime exposes only compute and utility by default; NVENC needs video.
  - name: NVIDIA_DRIVER_CAPABILITIES
    value: compute,video,utility
  {{- end }}
  {{- range $key, $value := .Values.worker.env }}
  - name: {{ $key }}
    value: {{ include "mirror.envValue" $value | quote }}
  {{- end }}
  {{- include "mirror.secretEnv" . | nindent 2 }}
{{- end -}}

{{/* A worker container's resources: the values', plus the GPUs asked for. */}}
{{- define "mirror.workerResources" -}}
{{- $resources := deepCopy .Values.worker.resources -}}
{{- $limits := default (dict) $resources.limits -}}
{{- if gt (int .Values.worker.gpu.nvidia) 0 -}}
{{- $_ := set $limits "nvidia.com/gpu" (int .Values.worker.gpu.nvidia) -}}
{{- end -}}
{{- range $name, $count := .Values.worker.gpu.resources -}}
{{- $_ := set $limits $name $count -}}
{{- end -}}
{{- if $limits -}}
{{- $_ := set $resources "limits" $limits -}}
{{- end -}}
{{- if eq .Values.worker.workDir.type "emptyDir" -}}
{{- /* The scheduler counts an emptyDir only through the pod's ephemeral-storage request. */ -}}
{{- $requests := default (dict) $resources.requests -}}
{{- if not (hasKey $requests "ephemeral-storage") -}}
{{- $_ := set $requests "ephemeral-storage" .Values.worker.workDir.size -}}
{{- end -}}
{{- $_ := set $resources "requests" $requests -}}
{{- end -}}
{{- toYaml $resources -}}
{{- end -}}

{{/* The worker pod's volumes: the work directory, /tmp, and /dev/dri when asked. */}}
{{- define "mirror.workerVolumes" -}}
{{- $work := .Values.worker.workDir -}}
- name: work
  {{- if eq $work.type "emptyDir" }}
  emptyDir:
    sizeLimit: {{ $work.size }}
  {{- else if eq $work.type "ephemeral" }}
  ephemeral:
    volumeClaimTemplate:
      metadata:
        labels:
          {{- include "mirror.selector" (list . "worker") | nindent 10 }}
      spec:
        accessModes: [ReadWriteOnce]
        {{- with $work.storageClassName }}
        storageClassName: {{ . }}
        {{- end }}
        resources:
          requests:
            storage: {{ $work.size }}
  {{- else if eq $work.type "persistentVolumeClaim" }}
  persistentVolumeClaim:
    claimName: {{ default (printf "%s-work" (include "mirror.fullname" .)) $work.existingClaim }}
  {{- else }}
  {{- fail (printf "worker.workDir.type: %q is none of emptyDir, ephemeral, persistentVolumeClaim" $work.type) }}
  {{- end }}
- name: tmp
  emptyDir:
    sizeLimit: 1Gi
{{- if .Values.worker.gpu.dri.enabled }}
- name: dri
  hostPath:
    path: /dev/dri
    type: Directory
{{- end }}
{{- end -}}

{{- define "mirror.workerMounts" -}}
- name: work
  mountPath: {{ .Values.worker.workDir.mountPath }}
- name: tmp
  mountPath: /tmp
{{- if .Values.worker.gpu.dri.enabled }}
- name: dri
  mountPath: /dev/dri
{{- end }}
{{- end -}}

{{/* The container securityContext of a worker: privileged only for /dev/dri when asked. */}}
{{- define "mirror.workerSecurityContext" -}}
{{- if and .Values.worker.gpu.dri.enabled .Values.worker.gpu.dri.privileged -}}
{{- toYaml (merge (dict "privileged" true "allowPrivilegeEscalation" true) (omit .Values.securityContext "allowPrivilegeEscalation")) -}}
{{- else -}}
{{- toYaml .Values.securityContext -}}
{{- end -}}
{{- end -}}

{{/* The pod securityContext of a worker: the render/video groups for /dev/dri. */}}
{{- define "mirror.workerPodSecurityContext" -}}
{{- $context := deepCopy .Values.podSecurityContext -}}
{{- if and .Values.worker.gpu.dri.enabled .Values.worker.gpu.dri.groups -}}
{{- $_ := set $context "supplementalGroups" .Values.worker.gpu.dri.groups -}}
{{- end -}}
{{- toYaml $context -}}
{{- end -}}

{{/*
KEDA's query for the ScaledObject: worker pods wanted, ceil(jobs / slots per pod), where
jobs are the due ones (`mirror_jobs_due`: status new, run_after passed) plus the running
ones (status processing). Running jobs count so that a scale-in never asks for fewer pods
than jobs in progress, and a job stranded by a dead pod keeps one worker up to reap it.
Due jobs do not count while the fleet is paused or draining (`mirror pause`): no worker
could claim them (mirror/db/leases.py's claim reads the same row).
*/}}
{{- define "mirror.kedaQuery" -}}
SELECT CEIL(((SELECT count(*) FROM media_mirror.jobs WHERE status = 'processing') + (SELECT count(*) FROM media_mirror.jobs WHERE status = 'new' AND run_after <= now() AND NOT EXISTS (SELECT 1 FROM media_mirror.fleet WHERE mode <> 'running'))) / {{ int .Values.worker.concurrency }}.0)::int
{{- end -}}

{{/*
KEDA's query for the ScaledJob: Jobs wanted for the due jobs alone. A running job is no
longer due (it is processing) and its Kubernetes Job keeps running: the `accurate`
strategy adds Jobs only for the work nobody has claimed.
*/}}
{{- define "mirror.kedaJobQuery" -}}
SELECT CEIL((SELECT count(*) FROM media_mirror.jobs WHERE status = 'new' AND run_after <= now() AND NOT EXISTS (SELECT 1 FROM media_mirror.fleet WHERE mode <> 'running')) / {{ int .Values.worker.concurrency }}.0)::int
{{- end -}}

{{/* The Secret key KEDA and the migration read Postgres' own URL from. */}}
{{- define "mirror.directDatabaseUrlKey" -}}
{{- if .Values.secrets.existingSecret -}}
{{- default "MIRROR_DATABASE_URL" .Values.secrets.directDatabaseUrlKey -}}
{{- else if .Values.secrets.directDatabaseUrl -}}
DIRECT_DATABASE_URL
{{- else -}}
MIRROR_DATABASE_URL
{{- end -}}
{{- end -}}
