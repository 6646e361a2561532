# sluice as a container image: a static binary (pure-Go SQLite, no cgo, no
# libc) on distroless/static, which holds CA certificates, /etc/passwd with a
# non-root user and nothing else.
#
#   docker build --build-arg VERSION=$(git describe --tags --always) -t sluice .
#   docker run -p 8080:8080 -v sluice-data:/data sluice
#
# With no arguments it serves /data on :$PORT (8080 unless the platform sets
# PORT, as Cloud Run does), replicating to /data/replica, with a token it
# generates at first start, prints once and keeps in /data/.sluice-token.
# For real durability name a bucket and your own token:
#   docker run -p 8080:8080 -v sluice-data:/data sluice serve -data /data \
#     -replica s3://BUCKET/sluice -token "$TOKEN"

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.version=${VERSION}" -o /out/sluice ./cmd/sluice
# The data folder, owned by the image's non-root user (distroless: 65532).
RUN mkdir -p /out/data && chown 65532:65532 /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sluice /usr/local/bin/sluice
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
WORKDIR /data
VOLUME /data
# serve listens on :$PORT when -addr is not given; platforms may override it.
ENV PORT=8080
EXPOSE 8080
ENTRYPOINT ["sluice"]
CMD ["serve", "-data", "/data"]
