package pki

// Config says where the cluster CA Secret is kept: the pki section of
// kip.yaml, each koanf tag a key.
type Config struct {
	// Namespace and SecretName locate the Secret holding the CA.
	Namespace  string `koanf:"namespace"`
	SecretName string `koanf:"secretName"`
}

// DefaultConfig is the Secret deploy/rbac grants kip.
func DefaultConfig() Config {
	return Config{Namespace: DefaultNamespace, SecretName: DefaultSecretName}
}
