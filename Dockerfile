# sluice as a container image: a static binary (pure-Go SQLite, no cgo, no
# libc) on distroless/static, which holds CA certificates, /etc/passwd with a
# non-root user and nothing else.
#
#   docker build --build-arg VERSION=$(git describe --tags --always) -t sluice .
#   docker run -p 8080:8080 -v sluice-data:/data sluice serve -data /data \
#     -addr 0.0.0.0:8080 -replica s3://BUCKET/sluice -token "$TOKEN"

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
EXPOSE 8080
ENTRYPOINT ["sluice"]
CMD ["serve", "-data", "/data", "-addr", "0.0.0.0:8080"]
