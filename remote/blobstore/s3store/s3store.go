// Package s3store serves s3:// URLs for package blobstore with the AWS SDK
// for Go v2, directly: keys are sent and listed byte for byte (no
// rewriting of "../", control characters or escape-like sequences, as
// gocloud's s3blob does), reads send If-Match with the pinned ETag, and
// each bucket gets one client whose connections are bounded and reused.
// Import it for its side effect:
//
//	import _ "github.com/gosafetensors/safetensors/remote/blobstore/s3store"
//
// URL parameters, as gocloud's s3blob spells them: region, endpoint
// (e.g. http://127.0.0.1:9000 for an S3-compatible store), use_path_style
// (alias s3ForcePathStyle; hostname_immutable=true means the same here),
// disable_https, dualstack, fips, accelerate, profile, anonymous, and
// awssdk=v2 (accepted and ignored). Any other parameter is an error.
// Credentials and the region come from the SDK's standard chain (AWS_*
// variables, ~/.aws, web identity, instance roles) unless the URL says;
// retries are the SDK's standard (or adaptive) retryer, with the attempt
// count and mode of AWS_MAX_ATTEMPTS and AWS_RETRY_MODE (or max_attempts
// and retry_mode in the profile), without its retry quota.
package s3store

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/gosafetensors/safetensors/remote"
	"github.com/gosafetensors/safetensors/remote/blobstore/internal/driver"
)

func init() { driver.Register("s3", open) }

type bucket struct {
	client *s3.Client
	name   string
	idle   interface{ CloseIdleConnections() }
}

// open opens the bucket an s3:// bucket URL names.
func open(ctx context.Context, u *url.URL, cfg driver.Config) (driver.Bucket, error) {
	var (
		load                                           []func(*config.LoadOptions) error
		endpoint                                       string
		pathStyle, disableHTTPS, accelerate, anonymous bool
	)
	q := u.Query()
	for _, p := range slices.Sorted(maps.Keys(q)) {
		if len(q[p]) != 1 {
			return nil, fmt.Errorf("s3: URL parameter %q given %d times", p, len(q[p]))
		}
		v := q.Get(p)
		flag := func() (bool, error) {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return false, fmt.Errorf("s3: URL parameter %s=%q: want true or false", p, v)
			}
			return b, nil
		}
		var err error
		var on bool
		switch p {
		case "region":
			load = append(load, config.WithRegion(v))
		case "endpoint":
			endpoint = v
		case "profile":
			load = append(load, config.WithSharedConfigProfile(v))
		case "use_path_style", "s3ForcePathStyle", "hostname_immutable":
			if on, err = flag(); on {
				pathStyle = true
			}
		case "disable_https":
			disableHTTPS, err = flag()
		case "accelerate":
			accelerate, err = flag()
		case "anonymous":
			anonymous, err = flag()
		case "dualstack":
			if on, err = flag(); on {
				load = append(load, config.WithUseDualStackEndpoint(aws.DualStackEndpointStateEnabled))
			}
		case "fips":
			if on, err = flag(); on {
				load = append(load, config.WithUseFIPSEndpoint(aws.FIPSEndpointStateEnabled))
			}
		case "awssdk":
			if v != "v2" && v != "2" {
				err = fmt.Errorf("s3: URL parameter awssdk=%q: this reader uses the AWS SDK v2", v)
			}
		default:
			err = fmt.Errorf("s3: unknown URL parameter %q (known: region, endpoint, use_path_style, s3ForcePathStyle, hostname_immutable, disable_https, dualstack, fips, accelerate, profile, anonymous, awssdk)", p)
		}
		if err != nil {
			return nil, err
		}
	}
	if anonymous {
		load = append(load, config.WithCredentialsProvider(aws.AnonymousCredentials{}))
	}
	// Reads are byte ranges, which a whole-object checksum cannot cover;
	// the SDK's default would also print a line to stderr for each.
	if os.Getenv("AWS_RESPONSE_CHECKSUM_VALIDATION") == "" {
		load = append(load, config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired))
	}
	maxConns := cfg.MaxConns
	if maxConns <= 0 {
		maxConns = 64
	}
	load = append(load, config.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxConnsPerHost = maxConns
		t.MaxIdleConnsPerHost = maxConns
		t.MaxIdleConns = maxConns
	})))
	awsCfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("s3: loading the AWS configuration: %w", err)
	}
	// The retry mode and attempt count are the SDK's (AWS_RETRY_MODE,
	// AWS_MAX_ATTEMPTS, retry_mode and max_attempts in ~/.aws/config),
	// which LoadDefaultConfig resolves only when no retryer is given: the
	// retryer is set after it.
	if awsCfg.RetryMaxAttempts < 0 {
		return nil, fmt.Errorf("s3: AWS_MAX_ATTEMPTS (or max_attempts) is %d: want at least 1", awsCfg.RetryMaxAttempts)
	}
	mode, attempts := awsCfg.RetryMode, awsCfg.RetryMaxAttempts
	awsCfg.Retryer = func() aws.Retryer { return newRetryer(mode, attempts) }
	// Freeze the client (the CA bundle, if any, is in it now) so that the
	// connection pool Close empties is the one requests use.
	b := &bucket{name: u.Host}
	if bc, ok := awsCfg.HTTPClient.(*awshttp.BuildableClient); ok {
		frozen := bc.Freeze()
		awsCfg.HTTPClient = frozen
		b.idle, _ = frozen.(interface{ CloseIdleConnections() })
	}
	b.client = s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		o.UsePathStyle = pathStyle
		o.UseAccelerate = accelerate
		o.EndpointOptions.DisableHTTPS = disableHTTPS
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
	return b, nil
}

// newRetryer returns the SDK's retryer for mode (standard unless
// "adaptive") with at most attempts attempts (0: the SDK's default, 3),
// without the standard retryer's retry quota: one token bucket per client
// would make many concurrent failures refuse retries ("retry quota
// exceeded"), and the attempt count bounds them already. The adaptive
// mode keeps its client-side send-rate limiting.
func newRetryer(mode aws.RetryMode, attempts int) aws.Retryer {
	std := func(o *retry.StandardOptions) {
		o.RateLimiter = ratelimit.None
		if attempts > 0 {
			o.MaxAttempts = attempts
		}
	}
	if mode == aws.RetryModeAdaptive {
		return retry.NewAdaptiveMode(func(o *retry.AdaptiveModeOptions) {
			o.StandardOptions = append(o.StandardOptions, std)
		})
	}
	return retry.NewStandard(std)
}

func (b *bucket) Close() error {
	if b.idle != nil {
		b.idle.CloseIdleConnections()
	}
	return nil
}

func status(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func (b *bucket) NewRangeReader(ctx context.Context, key string, off, n int64, version string) (*driver.Reader, error) {
	if off < 0 || n == 0 {
		return nil, fmt.Errorf("s3: invalid range %d+%d", off, n)
	}
	in := &s3.GetObjectInput{Bucket: &b.name, Key: aws.String(key)}
	if n > 0 {
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	} else if off > 0 {
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", off))
	}
	if version != "" {
		in.IfMatch = aws.String(version)
	}
	out, err := b.client.GetObject(ctx, in)
	if err != nil {
		switch status(err) {
		case http.StatusNotFound:
			return nil, fmt.Errorf("%w: %w", fs.ErrNotExist, err)
		case http.StatusPreconditionFailed:
			return nil, fmt.Errorf("%w: %w", remote.ErrObjectChanged, err)
		case http.StatusRequestedRangeNotSatisfiable:
			if off == 0 {
				return b.empty(ctx, key, version, err)
			}
		}
		return nil, err
	}
	r := &driver.Reader{Body: out.Body, ModTime: aws.ToTime(out.LastModified), Version: aws.ToString(out.ETag)}
	if in.Range == nil {
		r.Size = aws.ToInt64(out.ContentLength)
		return r, nil
	}
	start, end, total, ok := parseContentRange(aws.ToString(out.ContentRange))
	if !ok {
		out.Body.Close()
		return nil, fmt.Errorf("%w: %s: asked for %s, got Content-Range %q", remote.ErrProtocol, key, *in.Range, aws.ToString(out.ContentRange))
	}
	wantEnd := total - 1
	if n > 0 {
		wantEnd = min(off+n, total) - 1
	}
	if start != off || end != wantEnd || aws.ToInt64(out.ContentLength) != end-start+1 {
		out.Body.Close()
		return nil, fmt.Errorf("%w: %s: asked for %s of %d bytes, got Content-Range %q and %d bytes", remote.ErrProtocol, key, *in.Range, total, aws.ToString(out.ContentRange), aws.ToInt64(out.ContentLength))
	}
	r.Size = total
	return r, nil
}

// empty answers a read at 0 of an object that may be empty: stores refuse
// a range of an empty object (416 InvalidRange), so ask its attributes.
func (b *bucket) empty(ctx context.Context, key, version string, rangeErr error) (*driver.Reader, error) {
	in := &s3.HeadObjectInput{Bucket: &b.name, Key: aws.String(key)}
	if version != "" {
		in.IfMatch = aws.String(version)
	}
	h, err := b.client.HeadObject(ctx, in)
	if err != nil {
		if status(err) == http.StatusPreconditionFailed {
			return nil, fmt.Errorf("%w: %w", remote.ErrObjectChanged, err)
		}
		return nil, rangeErr
	}
	if aws.ToInt64(h.ContentLength) != 0 {
		return nil, rangeErr
	}
	return &driver.Reader{Body: io.NopCloser(strings.NewReader("")), ModTime: aws.ToTime(h.LastModified), Version: aws.ToString(h.ETag)}, nil
}

// WriteObject stores data with one PutObject (S3 makes an object visible
// whole, once stored durably), its MD5 sent so that the store refuses
// bytes damaged on the way.
func (b *bucket) WriteObject(ctx context.Context, key string, data []byte) error {
	sum := md5.Sum(data)
	_, err := b.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &b.name, Key: aws.String(key), Body: bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))), ContentMD5: aws.String(base64.StdEncoding.EncodeToString(sum[:])),
	})
	return err
}

// parseContentRange parses "bytes START-END/TOTAL".
func parseContentRange(s string) (start, end, total int64, ok bool) {
	rest, found := strings.CutPrefix(s, "bytes ")
	if !found {
		return 0, 0, 0, false
	}
	rng, tot, found := strings.Cut(rest, "/")
	if !found {
		return 0, 0, 0, false
	}
	a, z, found := strings.Cut(rng, "-")
	if !found {
		return 0, 0, 0, false
	}
	var err1, err2, err3 error
	start, err1 = strconv.ParseInt(a, 10, 64)
	end, err2 = strconv.ParseInt(z, 10, 64)
	total, err3 = strconv.ParseInt(tot, 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || start < 0 || end < start || total <= end {
		return 0, 0, 0, false
	}
	return start, end, total, true
}

func (b *bucket) ListPage(ctx context.Context, prefix, token string, pageSize int) (driver.Page, error) {
	in := &s3.ListObjectsV2Input{Bucket: &b.name, MaxKeys: aws.Int32(int32(pageSize)), EncodingType: types.EncodingTypeUrl}
	if prefix != "" {
		in.Prefix = aws.String(prefix)
	}
	if token != "" {
		in.ContinuationToken = aws.String(token)
	}
	out, err := b.client.ListObjectsV2(ctx, in)
	if err != nil {
		return driver.Page{}, err
	}
	// Keys that XML cannot carry (control characters) are percent-encoded
	// when the store says it applied the encoding; stores that ignore the
	// parameter send keys as they are.
	encoded := out.EncodingType == types.EncodingTypeUrl
	page := driver.Page{Objects: make([]driver.Object, 0, len(out.Contents))}
	for _, o := range out.Contents {
		key := aws.ToString(o.Key)
		if encoded {
			k, err := url.QueryUnescape(key)
			if err != nil {
				return driver.Page{}, fmt.Errorf("%w: listing: key %q is not URL-encoded as announced: %v", remote.ErrProtocol, key, err)
			}
			key = k
		}
		if key == "" {
			continue
		}
		page.Objects = append(page.Objects, driver.Object{Key: key, Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified)})
	}
	if aws.ToBool(out.IsTruncated) {
		page.Next = aws.ToString(out.NextContinuationToken)
		if page.Next == "" {
			return driver.Page{}, fmt.Errorf("%w: listing: truncated page without a continuation token", remote.ErrProtocol)
		}
	}
	return page, nil
}
