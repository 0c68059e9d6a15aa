//! `tls_server_config` of a web config: the settings as the file states them. A leaf, so that
//! the file's parser (`config`) and the TLS setup that honours them (`tls`) both read it
//! without depending on each other.

use std::path::PathBuf;

use serde::Deserialize;

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TlsServerConfig {
    /// The certificate chain as PEM text, instead of `cert_file`.
    pub cert: Option<String>,
    /// The private key as PEM text, instead of `key_file`.
    pub key: Option<String>,
    /// The client CA certificates as PEM text, instead of `client_ca_file`.
    pub client_ca: Option<String>,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    pub client_ca_file: Option<PathBuf>,
    pub client_auth_type: ClientAuthType,
    /// A client certificate must carry one of these subject alternative names (DNS name,
    /// e-mail address, IP address or URI, compared as text).
    pub client_allowed_sans: Vec<String>,
    /// Go names of TLS 1.2 cipher suites, in the server's order of preference.
    pub cipher_suites: Vec<String>,
    /// Go names of key exchange groups, in order of preference.
    pub curve_preferences: Vec<String>,
    pub min_version: Option<TlsVersion>,
    pub max_version: Option<TlsVersion>,
    /// The server picks the cipher suite by its own order (`cipher_suites`), not the client's.
    pub prefer_server_cipher_suites: bool,
}

impl Default for TlsServerConfig {
    fn default() -> Self {
        TlsServerConfig {
            cert: None,
            key: None,
            client_ca: None,
            cert_file: None,
            key_file: None,
            client_ca_file: None,
            client_auth_type: ClientAuthType::NoClientCert,
            client_allowed_sans: Vec::new(),
            cipher_suites: Vec::new(),
            curve_preferences: Vec::new(),
            min_version: None,
            max_version: None,
            prefer_server_cipher_suites: true,
        }
    }
}

/// Go's `tls.ClientAuthType` names.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
pub enum ClientAuthType {
    #[default]
    NoClientCert,
    /// Asks for a certificate, accepts a connection without one, checks none.
    RequestClientCert,
    /// Requires a certificate, checks nothing about it (exporter-toolkit's old name
    /// `RequireClientCert` means the same).
    #[serde(alias = "RequireClientCert")]
    RequireAnyClientCert,
    /// A certificate, if sent, must be signed by the client CA.
    VerifyClientCertIfGiven,
    /// A certificate signed by the client CA is required: mutual TLS.
    RequireAndVerifyClientCert,
}

impl ClientAuthType {
    pub fn verifies(self) -> bool {
        matches!(
            self,
            ClientAuthType::VerifyClientCertIfGiven | ClientAuthType::RequireAndVerifyClientCert
        )
    }
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    TLS10,
    TLS11,
    TLS12,
    TLS13,
}
