# Node.js and npm without a registry: the base image plus the host's node binary and npm, copied in
# from the build context (images.sh). Elsewhere use node:20-bookworm-slim.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
COPY node/ /usr/local/
# npm trusts the system's certificates (the base image's, with any proxy's CA images.sh added)
ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
RUN node --version && npm --version
