# The mirror image: `mirror` as the entrypoint, a worker by default.
#   docker build -t mirror .
#   docker run --env-file .env mirror              # a worker
#   docker run --env-file .env mirror db upgrade   # any other command
FROM python:3.11-slim

# Debian's ffmpeg: mirror runs the ffmpeg on PATH before imageio-ffmpeg's bundled build,
# and Debian's has the distribution's codecs and hardware support. tzdata: the zones a
# `TZ=Europe/Berlin` names, the local time of MIRROR_ACTIVE_HOURS (without it: UTC).
# GPU_PACKAGES: hardware encoders' user-space drivers, added by the compose overrides
# (docker-compose.gpu-dri.yml: VAAPI and QSV drivers); none by default.
ARG GPU_PACKAGES=""
RUN apt-get update \
    && apt-get install -y --no-install-recommends ffmpeg tzdata ${GPU_PACKAGES} \
    && rm -rf /var/lib/apt/lists/*

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# The source tree stays in /app and is installed editable (not a plain `pip install .`):
# mirror/db/migrations.py finds alembic.ini at Path(__file__).parents[2], i.e. beside the
# mirror/ package in the source tree, and alembic.ini points at alembic/ there. A regular
# install copies only the package into site-packages, where `mirror db upgrade` would find
# no migrations.
WORKDIR /app
COPY pyproject.toml README.md alembic.ini ./
COPY alembic ./alembic
COPY mirror ./mirror
RUN pip install -e .

# Not root: the worker only needs its work directory (downloads and ffmpeg outputs).
RUN useradd --create-home --uid 10001 mirror \
    && mkdir /work \
    && chown mirror:mirror /work
ENV MIRROR_WORK_DIR=/work
USER mirror

# SIGTERM (docker stop) makes the worker stop claiming and release its running job after
# MIRROR_SHUTDOWN_GRACE; give containers a stop timeout longer than that (compose:
# stop_grace_period; Kubernetes: deploy/helm/mirror computes terminationGracePeriodSeconds).
ENTRYPOINT ["mirror"]
CMD ["worker"]
