# The Ironfleet manager. Multi-stage: build with the Go toolchain, run on distroless as non-root.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY apis/ apis/
COPY cmd/ cmd/
COPY internal/ internal/
COPY metalprobe/ metalprobe/
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/manager ./cmd/manager

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
