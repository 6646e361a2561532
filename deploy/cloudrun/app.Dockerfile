# An application image with sluice inside, for `sluice run -- APP` on Cloud
# Run: sluice restores the database on boot, replicates it to GCS while the
# application runs, and ships everything when Cloud Run stops the instance.
# Build the sluice image first (docker build -t sluice . at the repository
# root), or copy the binary from a release.
FROM sluice AS sluice

FROM your-app-image
COPY --from=sluice /usr/local/bin/sluice /usr/local/bin/sluice
ENTRYPOINT ["sluice", "run", "-db", "/data/app.db", "-replica", "gs://BUCKET/app", "-addr", "0.0.0.0:9090", "--"]
CMD ["/app/server"]
