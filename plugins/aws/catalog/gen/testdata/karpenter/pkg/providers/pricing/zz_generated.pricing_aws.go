// Test fixture in the layout of karpenter-provider-aws's generated price maps.

package pricing

// generated at 2026-07-06T14:20:29Z for us-east-1

import ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

var InitialOnDemandPricesAWS = map[string]map[ec2types.InstanceType]float64{
	// us-east-1
	"us-east-1": {
		// c4 family
		"c4.large": 0.100000,
		// c5 family
		"c5.large": 0.085000, "c5.xlarge": 0.170000,
		// c9z family
		"c9z.large": 0.5, "c9z.xlarge": 1,
	},
}
