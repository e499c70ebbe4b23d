# revbot as a container: `docker build -t revbot . && docker run --env-file .env -p 3000:3000 -v revbot-data:/data revbot`
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PORT=3000 \
    DATABASE_URL=sqlite:////data/revbot.sqlite3

RUN useradd --create-home --uid 10001 revbot && mkdir /data && chown revbot:revbot /data

WORKDIR /app
# The pinned dependencies first (a cached layer; they include the model reviewer's SDKs, so
# REVIEWER=llm needs no rebuild), then the project itself, without test extras.
COPY requirements.txt ./
RUN pip install -r requirements.txt
COPY pyproject.toml README.md app.yml ./
COPY app ./app
RUN pip install --no-deps .

USER revbot
VOLUME ["/data"]
EXPOSE 3000
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('PORT', '3000'), timeout=4)"]
STOPSIGNAL SIGTERM
CMD ["python", "-m", "app", "serve"]
