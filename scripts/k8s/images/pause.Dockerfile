# containerd's sandbox ("pause") image for test clusters: a process that only waits.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
CMD ["sleep", "infinity"]
