FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md alembic.ini ./
COPY protos ./protos
COPY migrations ./migrations
COPY shared ./shared
COPY scheduler_service ./scheduler_service
COPY runtime_service ./runtime_service
RUN pip install --no-cache-dir . \
    && useradd --create-home --uid 10001 aijob
USER aijob
ENV AIJOB_LISTEN=0.0.0.0:50051
EXPOSE 50051
CMD ["python", "-m", "scheduler_service"]
