# A slim image that runs every entry point of the project as a non-root user.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY pyproject.toml README.md alembic.ini ./
COPY protos ./protos
COPY shared ./shared
COPY scheduler_service ./scheduler_service
COPY runtime_service ./runtime_service
COPY aijob ./aijob
RUN pip install --no-cache-dir . \
    && useradd --create-home --uid 10001 aijob
# migrations/ stays beside the working directory: `python -m scheduler_service migrate` finds it.
COPY migrations ./migrations
USER aijob
EXPOSE 50051 9464
CMD ["python", "-m", "scheduler_service"]
