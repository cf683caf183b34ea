# uv alone, as the Dockerfiles take it (elsewhere: ghcr.io/astral-sh/uv:<version>).
FROM scratch
COPY uv uvx /
