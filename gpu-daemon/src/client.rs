//! Client side of the daemon's Unix socket: a gRPC channel to it, and the
//! `grpc.health.v1` check that `semroute-daemon health` runs as a Kubernetes exec
//! probe (the socket is what the gateway's Envoy uses, so the probe exercises the
//! same path: socket file, permissions, HTTP/2, the Classifier's serving status).

use std::path::Path;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tonic::transport::{Channel, Endpoint};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

/// The service name the daemon reports as serving once its models are loaded.
pub const CLASSIFIER_SERVICE: &str = "semroute.v1.Classifier";

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot connect to {socket}: {source}")]
    Connect {
        socket: String,
        source: tonic::transport::Error,
    },
    #[error("health check of {service:?} failed: {status}")]
    Rpc {
        service: String,
        status: Box<tonic::Status>,
    },
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

/// Opens an HTTP/2 channel to the daemon on `socket` (the URI's authority is
/// unused; every connection goes to the socket).
pub async fn connect(socket: &Path) -> Result<Channel, ClientError> {
    let path = socket.to_path_buf();
    // A constant, valid URI: parsing cannot fail.
    let endpoint = Endpoint::from_static("http://localhost");
    endpoint
        .connect_with_connector(tower::service_fn(move |_| {
            let path = path.clone();
            async move {
                tokio::net::UnixStream::connect(path)
                    .await
                    .map(TokioIo::new)
            }
        }))
        .await
        .map_err(|source| ClientError::Connect {
            socket: socket.display().to_string(),
            source,
        })
}

/// Asks `grpc.health.v1.Health/Check` for `service` ("" = the server as a whole)
/// over `socket`, connection included within `timeout`.
pub async fn check_health(
    socket: &Path,
    service: &str,
    timeout: Duration,
) -> Result<ServingStatus, ClientError> {
    let call = async {
        let channel = connect(socket).await?;
        let reply = HealthClient::new(channel)
            .check(HealthCheckRequest {
                service: service.to_owned(),
            })
            .await
            .map_err(|status| ClientError::Rpc {
                service: service.to_owned(),
                status: Box::new(status),
            })?;
        Ok(ServingStatus::try_from(reply.into_inner().status).unwrap_or(ServingStatus::Unknown))
    };
    tokio::time::timeout(timeout, call)
        .await
        .map_err(|_| ClientError::Timeout(timeout))?
}
