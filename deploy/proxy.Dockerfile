# The scale-out stack's front proxy: Debian's nginx on the same base as Footnote's image, so
# the whole stack builds without a container registry (see compose.yaml).
ARG BASE=python:3.11-slim
FROM ${BASE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends nginx-light \
 && rm -rf /var/lib/apt/lists/* /etc/nginx/sites-enabled/default \
 && ln -sf /dev/stdout /var/log/nginx/access.log \
 && ln -sf /dev/stderr /var/log/nginx/error.log
COPY nginx.conf /etc/nginx/conf.d/footnote.conf
EXPOSE 3000
CMD ["nginx", "-g", "daemon off;"]
