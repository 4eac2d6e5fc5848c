# One image for every component; the command chooses it (stellwerk api|engine|beat|...).
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY common ./common
COPY scheduler ./scheduler
COPY workers ./workers
COPY connectors ./connectors
RUN pip install . && useradd --create-home --uid 10001 stellwerk
USER stellwerk

ENTRYPOINT ["stellwerk"]
CMD ["api", "--host", "0.0.0.0", "--port", "8080"]
