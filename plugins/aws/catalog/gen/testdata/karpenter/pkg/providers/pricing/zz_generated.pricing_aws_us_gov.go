// Test fixture in the layout of karpenter-provider-aws's generated price maps.

package pricing

// generated at 2026-06-15T15:14:03Z for us-east-1

import ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

var InitialOnDemandPricesUSGov = map[string]map[ec2types.InstanceType]float64{
	// us-gov-east-1
	"us-gov-east-1": {
		"c5.large": 0.102000,
	},
	// us-gov-west-1
	"us-gov-west-1": {
		"c5.large": 0.102000, "t3.small": 0.024400,
	},
}
