# A Rust builder without a registry: the base image plus a Rust toolchain copied in from the
# build context (here: the host's ~/.rustup toolchain). Elsewhere use rust:1.95-bookworm.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends gcc libc6-dev ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY rust/ /usr/local/rust/
ENV PATH=/usr/local/rust/bin:$PATH CARGO_HOME=/usr/local/cargo
RUN rustc --version && cargo --version
