# Redis from Debian for test clusters (elsewhere the chart uses the official redis image).
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends redis-server \
    && rm -rf /var/lib/apt/lists/*
USER 999:999
CMD ["redis-server"]
