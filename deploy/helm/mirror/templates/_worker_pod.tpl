{{/*
The worker pod, for the Deployment and the ScaledJob alike: call with
(list $ (list "worker") "Always").
*/}}
{{- define "mirror.workerPod" -}}
{{- $ := index . 0 -}}
{{- $args := index . 1 -}}
{{- $restart := index . 2 -}}
metadata:
  labels:
    {{- include "mirror.labels" $ | nindent 4 }}
    app.kubernetes.io/component: worker
  annotations:
    checksum/config: {{ include (print $.Template.BasePath "/configmap.yaml") $ | sha256sum }}
    checksum/secret: {{ include (print $.Template.BasePath "/secret.yaml") $ | sha256sum }}
    {{- with $.Values.worker.podDeletionCost }}
    controller.kubernetes.io/pod-deletion-cost: {{ . | quote }}
    {{- end }}
    {{- with $.Values.worker.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "mirror.serviceAccountName" $ }}
  automountServiceAccountToken: false
  restartPolicy: {{ $restart }}
  # SIGTERM, then MIRROR_SHUTDOWN_GRACE for the running job, then its release: see
  # mirror.terminationGracePeriodSeconds in _helpers.tpl.
  terminationGracePeriodSeconds: {{ include "mirror.terminationGracePeriodSeconds" $ }}
  {{- with $.Values.worker.gpu.runtimeClassName }}
  runtimeClassName: {{ . }}
  {{- end }}
  {{- with $.Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- include "mirror.workerPodSecurityContext" $ | nindent 4 }}
  containers:
    - name: worker
      image: {{ include "mirror.image" $ }}
      imagePullPolicy: {{ $.Values.image.pullPolicy }}
      command: [mirror]
      args:
        {{- toYaml $args | nindent 8 }}
      {{- include "mirror.workerEnv" $ | nindent 6 }}
      resources:
        {{- include "mirror.workerResources" $ | nindent 8 }}
      securityContext:
        {{- include "mirror.workerSecurityContext" $ | nindent 8 }}
      volumeMounts:
        {{- include "mirror.workerMounts" $ | nindent 8 }}
  volumes:
    {{- include "mirror.workerVolumes" $ | nindent 4 }}
  {{- with $.Values.worker.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $.Values.worker.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $.Values.worker.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}
